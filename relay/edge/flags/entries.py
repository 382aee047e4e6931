"""What a relay holds in memory of its flags: per scope, the answer rendered from the
upstream's (``Entry``), and the answers derived from it for other queries (``Views``).

Each scope's answer is held once, as the bytes SDKs get (rendered by
``relay.core.client_features.document`` from the upstream's answer, fetched with a current
``Unleash-Client-Spec``), with its ETag. A query that narrows it (``project``,
``namePrefix``) or an SDK older than segments (inlined) gets an answer derived from those
bytes when first asked, kept in a bounded least-recently-used set (``MAX_VIEWS`` answers,
``MAX_VIEW_BYTES`` in all), and derived again when the scope's answer changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping

from prometheus_client import Gauge

from relay.api.client_features import built, derived
from relay.core.client_features import Catalog, Rendered, Scope, from_answer, mended, read
from relay.core.delta import Changes
from relay.core.errors import Forbidden, Unauthorized, Unavailable
from relay.core.flag_shapes import tell_unread
from relay.core.keys import Principal, hash_key
from relay.edge.flags.fetch import DeltaPoll
from relay.edge.flags.revisions import moved, outdated, past
from relay.edge.flags.store import FlagScope
from relay.edge.key_words import KeyWords
from relay.store.key_words import VOUCHED, Word

log = logging.getLogger(__name__)

HOLD_OFF = 1.0
MAX_VIEWS = 1_000
MAX_VIEW_BYTES = 64 * 1024 * 1024
MAX_CATALOG_BYTES = 64 * 1024 * 1024
REFUSED_TTL = 60.0
MAX_REFUSED = 10_000

AGE = Gauge(
    "relay_flag_cache_age_seconds",
    "Seconds since the upstream last confirmed the flags of a scope in use (200 or 304)",
    ["environment", "projects"],
    multiprocess_mode="livemax",
)
SCOPES = Gauge(
    "relay_flag_cache_scopes", "Scopes with a copy of their flags", multiprocess_mode="livemax"
)
HELD = Gauge(
    "relay_flag_cache_bytes",
    "Bytes of flag answers held: each scope's, their catalogs, and answers derived for queries",
    multiprocess_mode="livesum",
)


class Entry:
    """One scope: its answer once there is one, and the SDK keys that asked for it (the
    relay fetches with one of them; a key refused upstream is dropped)."""

    __slots__ = (
        "base",
        "changes",
        "due_at",
        "failing",
        "fetch_key",
        "fetched_at",
        "follow",
        "hold_until",
        "keys",
        "poll",
        "publishing",
        "recorded",
        "rendered",
        "scope",
        "stored",
        "stream_after",
        "streamed",
        "task",
        "upstream_etag",
    )

    def __init__(self, scope: FlagScope, base: Scope) -> None:
        self.scope = scope
        self.base = base  # what an SDK with none of the filters gets: ``rendered``
        self.rendered: Rendered | None = None
        self.changes = Changes(0, 0)  # what changed, up to the revision ``rendered`` is at
        self.stored = 0  # the revision known to be in cache.db: at ``changes``', served
        self.publishing: asyncio.Task[None] | None = None  # storing a revision not yet served
        self.upstream_etag: str | None = None
        self.fetched_at: float | None = None  # wall clock: when the upstream last confirmed it
        self.due_at = 0.0  # wall clock: the next refresh, as this worker last knew it
        self.keys: OrderedDict[str, None] = OrderedDict()  # keys that asked here, newest last
        self.poll = DeltaPoll()
        self.recorded: dict[str, float] = {}  # key -> when it was last written to the file
        self.fetch_key: str | None = None  # the key the upstream last answered
        self.task: asyncio.Task[None] | None = None  # a fetch in flight
        self.follow: asyncio.Task[None] | None = None  # following the upstream's stream
        self.streamed = False  # a copy came from that stream: it confirms the copy
        self.stream_after = 0.0  # monotonic: not followed before (refused, failed)
        self.failing = False
        self.hold_until = 0.0  # monotonic: no first fetch again before, after one failed

    def take(self, body: bytes, stored: int | None = None) -> Rendered:
        """The upstream's answer ``body`` rendered as this scope's (``ValueError`` when it
        is none), segments as ids: the upstream chose its flags for the key. A flag or
        segment of it that cannot be read is the one held before, else left out. Fetched here
        (``stored`` None) or loaded at revision ``stored``; a loaded copy older than the
        one held leaves that one (``relay.edge.flags.revisions.outdated``)."""
        answer = read(body)
        if answer.unread:  # the copy held keeps what the new one cannot read
            answer = mended(answer, None if self.rendered is None else read(self.rendered.body))
            tell_unread(answer.unread, len(answer.kept), scope=self.scope.label)
        return self.adopt(*self.following(from_answer(answer, inline=False), stored))

    def following(self, catalog: Catalog, stored: int | None = None) -> tuple[Changes, Rendered]:
        """What this scope would hold with the answer read as ``catalog``, changing nothing:
        apart from ``adopt`` so that offline mode reads its file once for every scope, and
        does this work off the event loop (``relay.edge.flags.bootstrap``)."""
        rendered, held = built(catalog).answer(self.base), self.rendered
        if held is not None and outdated(self.changes, held, rendered, stored):
            return past(self.changes), held
        return moved(self.changes, held, rendered, stored), rendered

    def adopt(self, changes: Changes, rendered: Rendered) -> Rendered:
        self.changes, self.rendered = changes, rendered
        return rendered

    def fail(self, error: str) -> None:
        """A fetch failed: logged once until one succeeds; with no copy, SDKs get 503 at
        once for ``HOLD_OFF`` seconds."""
        if self.rendered is None:
            self.hold_until = time.monotonic() + HOLD_OFF
        if not self.failing:
            held = "serving the copy held" if self.rendered else "no copy: SDKs get 503"
            log.warning(
                f"cannot fetch flags from the upstream: {held}",
                extra={
                    "scope": self.scope.label,
                    "environment": self.scope.environment,
                    "error": error,
                },
            )
            self.failing = True

    def candidates(self) -> list[str]:
        """Keys to fetch with, best first: the one the upstream last answered, then the
        newest."""
        keys = list(reversed(self.keys))
        last = self.fetch_key
        if last is None or last not in self.keys:
            return keys
        return [last, *(k for k in keys if k != last)]


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


class EntrySource(ABC):
    """The client features answers of a source that holds one ``Entry`` per scope (the
    relay's copies, offline mode's file): each key's entry, narrowed through ``views``."""

    views: Views

    @abstractmethod
    async def entry(self, key: str, principal: Principal) -> tuple[Entry, Rendered]:
        """The entry ``key`` is served from, and its answer."""

    async def answer(self, key: str, principal: Principal, scope: Scope) -> Rendered:
        entry, rendered = await self.entry(key, principal)
        return self.views.get(entry, rendered, scope)

    async def feature(
        self, key: str, principal: Principal, scope: Scope, name: str
    ) -> bytes | None:
        entry, rendered = await self.entry(key, principal)
        return self.views.feature(entry, rendered, scope, name)


class Refusals:
    """Keys the upstream refused for flags, with its status: the relay's word on them
    (``relay.edge.key_words``), one for every worker. A refusal stands ``REFUSED_TTL``
    seconds; then one request of this worker asks the upstream again (a fetch with the
    key) while it stands for the others, for ``REFUSED_TTL`` more at most."""

    def __init__(self, words: KeyWords) -> None:
        self._words = words
        self._asking: OrderedDict[str, float] = OrderedDict()  # key hash -> until (monotonic)

    async def add(self, key: str, status: int) -> None:
        await self._words.say([Word(hash_key(key), status, time.time())])

    async def clear(self, key: str, principal: Principal) -> None:
        """The upstream answered flags to ``key`` again."""
        self._asking.pop(hash_key(key), None)
        await self._words.say([Word(hash_key(key), VOUCHED, time.time(), principal)])

    def check(self, key: str) -> int | None:
        """Raises the standing refusal of ``key``. One that has run out is returned (its
        status) for the caller to ask the upstream, and stands meanwhile for the others."""
        digest = hash_key(key)
        word = self._words.get(digest)
        if word is None or word.vouched:
            return None
        asking = self._asking.get(digest, 0.0) > time.monotonic()
        if asking or word.within(REFUSED_TTL, time.time()):
            raise self.error(word.status)
        self._asking[digest] = time.monotonic() + REFUSED_TTL
        self._asking.move_to_end(digest)
        while len(self._asking) > MAX_REFUSED:
            self._asking.popitem(last=False)
        return word.status

    @staticmethod
    def error(status: int) -> Forbidden | Unauthorized:
        if status == 403:
            return Forbidden("The upstream refuses this API token access to the flags")
        return Unauthorized("The provided API token is invalid or has expired")

    def status(self, key: str, otherwise: int) -> int:
        """The status ``key`` stands refused with, else ``otherwise``."""
        word = self._words.get(hash_key(key))
        return word.status if word is not None and not word.vouched else otherwise


def vouched(entries: Iterable[Entry], environment: str) -> str | None:
    """A key of ``environment`` the upstream last answered flags to, one that sees every
    project first: what a relay without an upstream key sends that environment's counts
    with (``relay.edge.metrics.keys``)."""
    found: list[tuple[bool, str]] = []
    for entry in entries:
        if entry.scope.environment != environment or entry.rendered is None:
            continue
        # the key of its last fetch, else (another worker fetched) the newest that asked
        # here: a key the upstream refused has left ``keys``
        key = entry.fetch_key or next(reversed(entry.keys), None)
        if key is not None:
            found.append(("*" not in entry.scope.projects, key))
    return min(found)[1] if found else None


def report(entries: Iterable[Entry], views: Views) -> None:
    """The gauges of what is held: each scope's age, the scopes with a copy, the bytes."""
    now = time.time()
    held, scopes = views.bytes + views.catalog_bytes, 0
    for entry in entries:
        if entry.rendered is not None:
            held += len(entry.rendered.body)
            scopes += 1
        if entry.keys and entry.fetched_at is not None:
            AGE.labels(entry.scope.environment, entry.scope.label).set(now - entry.fetched_at)
    SCOPES.set(scopes)
    HELD.set(held)


def forget(entry: Entry) -> None:
    """A scope no longer held leaves the age gauge, and its stream upstream ends."""
    if entry.follow is not None:
        entry.follow.cancel()
    with contextlib.suppress(KeyError):  # never reported
        AGE.remove(entry.scope.environment, entry.scope.label)


def no_copy() -> Unavailable:
    return Unavailable("The relay has no copy of these flags yet and cannot reach the upstream")


class Readiness:
    """Ready once every configured key (``client_tokens``) has a copy of its scope, fresh or
    stored, or was refused by the upstream (which has then answered for it): told once."""

    def __init__(self, configured: Mapping[str, Principal], on_ready: Callable[[], None]) -> None:
        self._configured = configured
        self._settled: set[str] = set()  # configured keys refused
        self._on_ready: Callable[[], None] | None = on_ready

    def settle(self, key: str) -> None:
        if key in self._configured:
            self._settled.add(key)

    def check(self, entry_of: Callable[[str, Principal], Entry | None]) -> None:
        if self._on_ready is None:
            return
        for key, principal in self._configured.items():
            entry = entry_of(key, principal)
            if key not in self._settled and (entry is None or entry.rendered is None):
                return
        self._on_ready()
        self._on_ready = None
