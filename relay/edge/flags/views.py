"""The answers derived from a scope's for other queries: a query that narrows it
(``project``, ``namePrefix``) or an SDK older than segments (inlined) gets an answer derived
from the scope's bytes when first asked, kept in a bounded least-recently-used set
(``MAX_VIEWS`` answers, ``MAX_VIEW_BYTES`` in all), and derived again when the scope's
answer changes; the catalogs they are derived from, bounded alike."""

from __future__ import annotations

from collections import OrderedDict

from relay.api.client_features import built, derived
from relay.core.client_features import Catalog, Rendered, Scope, from_answer, read
from relay.edge.flags.entries import Entry
from relay.edge.flags.store import FlagScope

MAX_VIEWS = 1_000
MAX_VIEW_BYTES = 64 * 1024 * 1024
MAX_CATALOG_BYTES = 64 * 1024 * 1024


class Views:
    """Catalogs of the scopes' answers, and the answers derived from them, least recently
    used first out."""

    def __init__(
        self,
        most: int = MAX_VIEWS,
        most_bytes: int = MAX_VIEW_BYTES,
        catalog_bytes: int = MAX_CATALOG_BYTES,
    ) -> None:
        self._most = most
        self._most_bytes = most_bytes
        self._catalog_bytes = catalog_bytes
        self.bytes = 0  # of the answers derived
        self.catalog_bytes = 0
        self._held: OrderedDict[tuple[FlagScope, Scope], tuple[str, Rendered]] = OrderedDict()
        self._catalogs: OrderedDict[tuple[FlagScope, bool], tuple[str, Catalog]] = OrderedDict()

    def get(self, entry: Entry, rendered: Rendered, scope: Scope) -> Rendered:
        """``scope``'s answer from ``entry``'s ``rendered``, put together once per change."""
        if scope == entry.base:
            return rendered
        key = (entry.scope, scope)
        held = self._held.get(key)
        if held is not None and held[0] == rendered.etag:
            self._held.move_to_end(key)
            return held[1]
        view = derived(self.catalog(entry, rendered, scope.inline_segments).answer(scope))
        if held is not None:
            self.bytes -= len(held[1].body)
        self._held[key] = (rendered.etag, view)
        self._held.move_to_end(key)
        self.bytes += len(view.body)
        while len(self._held) > 1 and (
            len(self._held) > self._most or self.bytes > self._most_bytes
        ):
            self.bytes -= len(self._held.popitem(last=False)[1][1].body)
        return view

    def feature(self, entry: Entry, rendered: Rendered, scope: Scope, name: str) -> bytes | None:
        """One feature of ``scope``'s answer, None when it has none of that name: a lookup
        in the catalog, whatever the number of flags."""
        return self.catalog(entry, rendered, scope.inline_segments).feature(scope, name)

    def catalog(self, entry: Entry, rendered: Rendered, inline: bool) -> Catalog:
        """The catalog of ``rendered`` (``entry``'s answer), built when it changed."""
        key = (entry.scope, inline)
        held = self._catalogs.get(key)
        if held is not None and held[0] == rendered.etag:
            self._catalogs.move_to_end(key)
            return held[1]
        if held is not None:
            self.catalog_bytes -= held[1].size
        catalog = built(from_answer(read(rendered.body), inline))
        self._catalogs[key] = (rendered.etag, catalog)
        self._catalogs.move_to_end(key)
        self.catalog_bytes += catalog.size
        while len(self._catalogs) > 1 and self.catalog_bytes > self._catalog_bytes:
            self.catalog_bytes -= self._catalogs.popitem(last=False)[1][1].size
        return catalog
