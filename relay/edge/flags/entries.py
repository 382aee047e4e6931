"""What a relay holds in memory of its flags per scope (``Entry``): the answer rendered from
the upstream's, held once as the bytes SDKs get (rendered by
``relay.core.client_features.document`` from the upstream's answer, fetched with a current
``Unleash-Client-Spec``) with its ETag, and the keys that asked for it; the gauges of what
is held. Answers derived from it for other queries are ``relay.edge.flags.views``'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable

from prometheus_client import Gauge

from relay.api.client_features import built
from relay.core.client_features import Catalog, Rendered, Scope, from_answer, mended, read
from relay.core.delta import Changes
from relay.core.errors import Unavailable
from relay.core.flag_shapes import tell_unread
from relay.edge.flags.fetch import DeltaPoll
from relay.edge.flags.revisions import moved, outdated, past
from relay.edge.flags.store import FlagScope

log = logging.getLogger(__name__)

HOLD_OFF = 1.0

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


def report(entries: Iterable[Entry], derived: int) -> None:
    """The gauges of what is held: each scope's age, the scopes with a copy, the bytes (with
    ``derived``, those of the answers and catalogs derived from them: ``Views``)."""
    now = time.time()
    held, scopes = derived, 0
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
