"""Offline mode's flags: a file in either format Unleash Edge's offline mode reads, served
to the configured keys through the same entries, views and deltas as a relay's copies
(``relay.edge.flags.entries``), so the client features answer, the delta, the stream and
the Frontend API agree.

The formats: a client features answer (``{"version": 2, "features": [...]}``), or Edge's
simple one, ``{"flag": {"enabled": true, "variant": "v"}}``, read as Edge reads it (a flag
on for everyone with the ``default`` strategy, in project ``default``, and a variant of
weight 1000 when one is named). Each key sees the file's flags of its projects, whatever
its environment (the file has one set of flags).

``reload`` reads the file again when its size, modification time or inode changed; a file
that cannot be read (missing, half written, not JSON, not flags) keeps the last good copy,
with an error logged once per change of the file; a flag of it that cannot be read
(``relay.core.flag_shapes``) keeps its last good copy, the others are taken. At start such
a file is an error: there is nothing to serve.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from relay.api.broadcast import Broadcast
from relay.api.shared import CatchUp, Kind, Shared
from relay.core.client_features import (
    Answer,
    Rendered,
    Scope,
    from_answer,
    mended,
    projects_of,
    read,
)
from relay.core.delta import Changes
from relay.core.flag_shapes import tell_unread
from relay.core.keys import Principal
from relay.edge.flags.entries import Entry
from relay.edge.flags.entry_source import EntrySource
from relay.edge.flags.files import NotReadable, read_bounded
from relay.edge.flags.revisions import EPOCH
from relay.edge.flags.store import FlagScope
from relay.edge.flags.views import Views

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 64 * 1024 * 1024


class BootstrapError(ValueError):
    """The file cannot be served; the message names the file and why, never its content."""


def parse(content: bytes) -> Answer:
    """The file's flags as a client features answer, read, in either format
    (``BootstrapError`` when it is neither)."""
    try:
        document = json.loads(content)
    except (ValueError, RecursionError) as exc:
        raise BootstrapError(f"not JSON: {str(exc)[:200]}") from None
    if isinstance(document, dict) and isinstance(document.get("features"), list):
        body = content
    elif isinstance(document, dict) and all(_simple(v) for v in document.values()):
        body = json.dumps(_from_simple(document)).encode()
    else:
        raise BootstrapError(
            'neither a client features answer ({"features": [...]}) nor {"flag": {"enabled": true}}'
        )
    try:
        return read(body)
    except (ValueError, RecursionError) as exc:
        raise BootstrapError(f"not flags: {exc}") from None


def _simple(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("enabled"), bool)
        and isinstance(value.get("variant"), str | None)
    )


def _from_simple(flags: Mapping[str, Any]) -> dict[str, Any]:
    """Edge's reading of the simple format (``make_simple_bootstrap``)."""
    features = []
    for name, flag in sorted(flags.items()):
        variant = flag.get("variant")
        variants = [{"name": variant, "weight": 1000, "weightType": "fix", "stickiness": "default"}]
        features.append(
            {
                "name": name,
                "type": "release",
                "enabled": flag["enabled"],
                "project": "default",
                "stale": False,
                "impressionData": False,
                "strategies": [{"name": "default", "parameters": {}, "constraints": []}],
                "variants": variants if variant is not None else [],
            }
        )
    return {"version": 2, "features": features}


Following = tuple[Answer, list[tuple[Entry, Changes, Rendered]]]
"""The file's flags read, and what each scope would hold with them."""


class FileFlags(EntrySource):
    """The flags of offline mode: one entry per scope of the configured keys, all rendered
    from the file. The ``FlagSource`` of the client features routes, the ``CopySource`` of the
    deltas, the ``FrontendSource`` of the Frontend API and the ``EvaluationSource`` of
    OFREP."""

    def __init__(
        self, path: Path, keys: Mapping[str, Principal], shared: Shared | None = None
    ) -> None:
        """``keys``: the configured keys (client and frontend); no other key gets here.
        ``shared``: the memory of the service's workers: a worker that reloaded the file
        says so, and the others reload it before their next answer; a revision is the
        file's time (seconds since ``revisions.EPOCH``), the same in every worker."""
        self.path = path
        self._catch_up = None if shared is None else CatchUp(shared, Kind.FLAGS, self.reload)
        self.views = Views()
        self.moved = Broadcast()
        self._entries: dict[FlagScope, Entry] = {}
        for principal in keys.values():
            scope = _flag_scope(principal)
            base = Scope(scope.environment, projects_of(scope.projects, ()), None, False)
            self._entries.setdefault(scope, Entry(scope, base))
        self._seen: tuple[int, int, int] | None = None
        self._failed: tuple[int, int, int] | None = None
        self._last: Answer | None = None  # the file's flags as last read (and mended)

    def load(self) -> None:
        """The file read at start: ``BootstrapError`` when it cannot be served."""
        stat = self._stat()
        self._adopt(self._following(stat), stat)

    async def reload(self) -> None:
        """The file read again when it changed; a file that cannot be read is logged (once
        per change) and the copy held stays. Read, and each scope's answer rendered and
        compared, in a thread: the event loop only swaps the copies (a file of tens of MB
        takes seconds of that work, during which requests are served meanwhile)."""
        try:
            stat = self._stat()
        except BootstrapError as exc:
            self._refused(exc, (0, 0, 0))
            return
        if stat in (self._seen, self._failed):
            return
        try:
            moved = self._adopt(await asyncio.to_thread(self._following, stat), stat)
        except BootstrapError as exc:
            # the file as it was before the read: one written meanwhile (a half-written
            # file read, then finished) is read again at the next tick, not taken as failed
            self._refused(exc, stat)
            return
        if moved and self._catch_up is not None:
            self._catch_up.published()
        log.info("bootstrap file reloaded", extra={"path": str(self.path)})

    async def _current(self) -> None:
        if self._catch_up is not None:
            await self._catch_up.current()

    def _refused(self, exc: BootstrapError, stat: tuple[int, int, int]) -> None:
        """Said once per state of the file (``stat``, ``(0, 0, 0)`` when there is none)."""
        if stat != self._failed:
            log.error(
                "bootstrap file not reloaded: the flags held are served",
                extra={"path": str(self.path), "error": str(exc)},
            )
        self._failed = stat

    def _stat(self) -> tuple[int, int, int]:
        try:
            stat = os.stat(self.path)
        except OSError as exc:
            raise BootstrapError(f"{self.path}: {exc.strerror}") from None
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino)

    def _following(self, stat: tuple[int, int, int]) -> Following:
        """The file read once, and what each scope would hold with it; changes nothing (only
        ``reload`` runs it, one at a time, so the entries it reads stay as they are). A flag
        of the file that cannot be read is the one read last time, else left out: a typo in
        one flag does not take it from SDKs, nor the others' changes."""
        try:
            answer = parse(read_bounded(self.path, MAX_FILE_BYTES))
        except NotReadable as exc:
            raise BootstrapError(str(exc)) from None
        answer = mended(answer, self._last)
        tell_unread(answer.unread, len(answer.kept), path=str(self.path))
        catalog = from_answer(answer, inline=False)
        revision = max(1, stat[0] // 1_000_000_000 - EPOCH)
        scopes = [(entry, *entry.following(catalog, revision)) for entry in self._entries.values()]
        return answer, scopes

    def _adopt(self, following: Following, stat: tuple[int, int, int]) -> bool:
        """Whether a revision moved."""
        moved = False
        self._last, scopes = following
        for entry, changes, rendered in scopes:
            moved |= changes.revision != entry.changes.revision
            entry.adopt(changes, rendered)
        self._seen, self._failed = stat, None
        if moved:
            self.moved.wake()
        return moved

    async def entry(self, key: str, principal: Principal) -> tuple[Entry, Rendered]:
        await self._current()
        entry = self._entries[_flag_scope(principal)]
        if entry.rendered is None:  # load() runs before the routes are served
            raise RuntimeError("bootstrap file not loaded")
        return entry, entry.rendered

    async def document(self, principal: Principal) -> Rendered:
        scope = Scope(principal.environment, projects_of(principal.projects, ()), None, False)
        return await self.answer("", principal, scope)

    async def flags(self, key: str, principal: Principal) -> Rendered:
        """OFREP's flags of a configured key, frontend or client (``EvaluationSource``)."""
        return await self.document(principal)

    async def next_change(self) -> None:
        await self.moved.wait()

    def copies(self) -> Iterable[Entry]:
        return self._entries.values()


def _flag_scope(principal: Principal) -> FlagScope:
    return FlagScope(principal.environment, tuple(sorted(principal.projects)))
