"""A relay's revisions of the delta protocol, per scope: each new copy of the upstream's
answer is compared with the one held (``relay.core.delta.compared``), and what changed is
kept at the scope's next revision, so that ``/api/client/delta`` and
``/api/client/streaming`` answer from the relay's copy as the standalone does from its
change log (``relay.edge.flags.deltas``).

Revisions are the relay's own, not the upstream's (it may have none): a scope's first copy
is at the wall clock's seconds since ``EPOCH``, each change one more (SDKs hold event ids
in 32 bits: Yggdrasil's are ``u32``, so no milliseconds). A relay that lost its
``cache.db`` so starts above anything it gave out before, and an SDK's revision from then
gets a hydration, never a silent "nothing changed". The revision is stored with the copy:
other workers take it from there (comparing with the copy they hold), and a restarted relay
resumes at it. A worker that loads a copy some revisions on (another took several changes
meanwhile) does not know what changed at the revisions in between (a flag added, then
removed): a client at one of them, which another worker brought there, is hydrated
(``Changes.skipped``). Should two workers give one revision different flags (each took a first
copy of its own), the one that sees it moves past both, hydrating its clients, and stores
that revision, which the others then take (with the same flags, without events). A copy
loaded with other flags at a revision a worker is at or past, which the upstream put
together before the worker's own (a lower ``meta.revisionId``: a poll answered after a
change streamed elsewhere), is older: the worker's own stands, past both (``outdated``),
and is stored for the others.
What changed is kept per flag and segment, once each, at most ``MAX_CHANGES`` (the oldest
dropped: a client from before them is hydrated).
"""

from __future__ import annotations

import time

from relay.core.client_features import Rendered, read
from relay.core.delta import Change, Changes, compared

MAX_CHANGES = 10_000
EPOCH = 1_704_067_200  # 2024-01-01: revisions fit a signed 32-bit id until 2092


def first() -> int:
    return max(1, int(time.time()) - EPOCH)


def moved(
    held: Changes, old: Rendered | None, new: Rendered, stored: int | None, most: int = MAX_CHANGES
) -> Changes:
    """What changed up to ``new``, replacing ``old`` (the copy held at ``held.revision``):
    fetched here (``stored`` None), or loaded at revision ``stored`` (0: none kept); at
    most ``most`` changes kept."""
    if old is None or stored == 0:
        revision = stored or first()
        return Changes(revision, revision)
    if stored is not None and stored <= held.revision:
        if not _compared(old, new, stored):
            return held  # the flags held, at a revision behind or the same
        revision = held.revision + 1  # two workers gave one revision other flags: past both
        return Changes(revision, revision)
    revision = held.revision + 1 if stored is None else stored
    skipped = held.skipped
    if revision > held.revision + 1:  # another worker's, past revisions it gave out
        skipped = (*skipped, (held.revision, revision))
    changes = _compared(old, new, revision)
    if not changes:
        return held if stored is None else Changes.of(held.floor, revision, held.changes, skipped)
    kept = [*held.changes, *changes]
    floor = held.floor
    if len(kept) > most:
        floor = max(c.revision for c in kept[: len(kept) - most])
    return Changes.of(floor, revision, kept, skipped)


def outdated(held: Changes, old: Rendered, new: Rendered, stored: int | None) -> bool:
    """``new``, loaded at revision ``stored`` (at or behind ``held``), has other flags than
    ``old`` and is older by the upstream's revisions (when both have one): ``old`` stands,
    at ``past(held)``. Only a clash is judged so: a copy at a later revision is taken
    whatever the upstream's (which go back when its own store is restored)."""
    return (
        stored is not None
        and 0 < stored <= held.revision
        and 0 < new.revision < old.revision
        and bool(_compared(old, new, stored))
    )


def past(held: Changes) -> Changes:
    """The flags held, at the next revision: a client at any revision held gets its events."""
    return Changes.of(held.floor, held.revision + 1, held.changes, held.skipped)


def _compared(old: Rendered, new: Rendered, revision: int) -> list[Change]:
    return compared(read(old.body), read(new.body), revision)
