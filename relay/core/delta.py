"""Unleash's delta protocol, pure: what changed since a revision, for one scope, as the events
``GET /api/client/delta`` answers and ``GET /api/client/streaming`` sends.

What changed is data (``Changes``): per flag and per segment, the last revision that
changed it (and a flag's projects, for the scopes it left or entered). The central service reads
it from its change log; a relay gets it by comparing two copies of its upstream's answer
(``compared``). Events are rendered from the scope's CURRENT catalog, never from a stored copy of
the change: a changed flag the scope still has is ``feature-updated`` with its content now,
one it no longer has (archived, out of the environment) ``feature-removed``. So each flag
and segment is sent at most once per answer, at the revision of its last change, and the
client ends with exactly the flags the client features answer gives (the property test
replays that). A ``segment-updated`` is sent before a feature that refers to the segment,
as Unleash does, so an SDK never holds a feature whose segment it lacks.
A ``segment-removed`` goes only to scopes that may hold the segment: it was global, or
of one of their projects (the central service's log), or used by their flags (a relay's
copies compared); a key never learns another project's segment ids.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from relay.core.catalog import Catalog, Scope, encode
from relay.core.client_features import Answer

FLAG = "flag"
SEGMENT = "segment"
MAX_SKIPPED = 64


@dataclass(frozen=True, slots=True)
class Change:
    """The last change of one flag (``key``: its name, ``projects``: the project it is in,
    and the one it was in if it moved) or segment (``key``: its id as text, ``projects``:
    those whose flags may use it; none for a global segment)."""

    revision: int
    kind: str
    key: str
    projects: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Changes:
    """Every flag and segment changed after ``floor`` and up to ``revision``, each once (its
    last change), sorted by revision: a client at a revision before ``floor`` (or after
    ``revision``: another instance's, not yet seen here) gets a hydration instead, and so
    does one at a revision within ``skipped``: ranges (both ends excluded) of revisions
    others gave out that these changes never were at (a relay worker that loaded another's
    copy a few revisions on: what changed at those in between, a flag added then removed,
    is not known here)."""

    floor: int
    revision: int
    changes: tuple[Change, ...] = ()
    _revisions: list[int] = field(default_factory=list, compare=False, repr=False)
    skipped: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(
        cls,
        floor: int,
        revision: int,
        changes: Iterable[Change],
        skipped: tuple[tuple[int, int], ...] = (),
    ) -> Changes:
        """From changes in any order, several per flag or segment: the last of each kept,
        with every project the flag was in (a scope it left must hear of it). At most
        ``MAX_SKIPPED`` ranges skipped are kept: past them the floor rises above the
        oldest."""
        while len(skipped) > MAX_SKIPPED:
            floor, skipped = max(floor, skipped[0][1]), skipped[1:]
        skipped = tuple((low, high) for low, high in skipped if high - 1 > max(low, floor - 1))
        last: dict[tuple[str, str], Change] = {}
        for change in sorted(changes, key=lambda c: c.revision):
            before = last.pop((change.kind, change.key), None)
            if before is not None and not set(before.projects) <= set(change.projects):
                projects = tuple(sorted({*before.projects, *change.projects}))
                change = Change(change.revision, change.kind, change.key, projects)
            last[(change.kind, change.key)] = change
        kept = tuple(c for c in last.values() if floor < c.revision <= revision)
        return cls(floor, revision, kept, [c.revision for c in kept], skipped)

    def since(self, revision: int) -> tuple[Change, ...]:
        return self.changes[bisect_right(self._revisions, revision) :]

    def holds(self, revision: int) -> bool:
        """A client at ``revision`` can be brought up to date with events."""
        return self.floor <= revision <= self.revision and not any(
            low < revision < high for low, high in self.skipped
        )


def compared(old: Answer | None, new: Answer, revision: int) -> list[Change]:
    """What changed from one copy of a client features answer to the next (a relay's
    copies of its upstream's), as changes at ``revision``: every flag and segment added,
    removed or different; segments first."""
    was = {} if old is None else {f["name"]: f for f in old.features}
    now = {f["name"]: f for f in new.features}
    was_segments = {} if old is None else old.segments
    changes = [
        Change(revision, SEGMENT, str(id), _users(id, was, now))
        for id in sorted(was_segments.keys() | new.segments.keys())
        if was_segments.get(id) != new.segments.get(id)
    ]
    for name in sorted(was.keys() | now.keys()):
        if was.get(name) != now.get(name):
            projects = {f.get("project", "default") for f in (was.get(name), now.get(name)) if f}
            changes.append(Change(revision, FLAG, name, tuple(sorted(projects))))
    return changes


def _users(id: int, *copies: Mapping[str, Any]) -> tuple[str, ...]:
    """The projects of the flags of ``copies`` whose strategies use segment ``id``."""
    return tuple(
        sorted(
            {
                str(f.get("project", "default"))
                for copy in copies
                for f in copy.values()
                if any(id in s.get("segments", ()) for s in f.get("strategies", ()))
            }
        )
    )


@dataclass(frozen=True, slots=True)
class Delta:
    """A delta answer: its JSON body (``{"events": [...]}``), the id of its last event (the
    ETag, the SSE ``id``; the client's revision when there is none), the revision the
    client is then at, and how many events it holds."""

    body: bytes
    last: int
    revision: int
    events: int
    hydration: bool = False


def hydration(catalog: Catalog, scope: Scope, revision: int) -> Delta:
    """Every flag and segment ``scope`` sees, as one ``hydration`` event: the same features
    and segments as the client features answer."""
    features, segments = catalog.documents(scope)
    parts: list[bytes | memoryview] = [
        b'{"events":[{"eventId":%d,"type":"hydration","features":[' % revision,
        *features,
        b'],"segments":[',
        b",".join(segments),
        b"]}]}",
    ]
    return Delta(b"".join(parts), revision, revision, 1, hydration=True)


def delta(catalog: Catalog, scope: Scope, changes: Changes, since: int | None) -> Delta:
    """The events that bring a client at ``since`` to ``changes.revision`` in ``scope`` (none
    when nothing it sees changed); a hydration when ``since`` is None or not held."""
    if since is None or not changes.holds(since):
        return hydration(catalog, scope, changes.revision)
    events = _events(catalog, scope, changes.since(since))
    body = b'{"events":[' + b",".join(event for _, event in events) + b"]}"
    last = events[-1][0] if events else since
    return Delta(body, last, changes.revision, len(events))


def in_scope(scope: Scope, name: str, projects: tuple[str, ...]) -> str | None:
    """The first of ``projects`` in which ``scope`` may hold a flag of this name, if any."""
    if scope.name_prefix is not None and not name.startswith(scope.name_prefix):
        return None
    return next((p for p in projects if scope.projects is None or p in scope.projects), None)


def _events(catalog: Catalog, scope: Scope, changes: Iterable[Change]) -> list[tuple[int, bytes]]:
    used = catalog.used_segments(scope)
    sent: set[int] = set()
    events: list[tuple[int, bytes]] = []

    def segment(revision: int, id: int, projects: tuple[str, ...] = ()) -> None:
        fragment = catalog.segment(id)
        if id in sent or (fragment is not None and id not in used):
            return  # sent already, or no flag of the scope uses it
        if fragment is None and not _may_hold(scope, projects):
            return  # another project's: the scope never had it
        sent.add(id)
        if fragment is None:
            events.append((revision, _event(revision, "segment-removed", {"segmentId": id})))
        else:
            events.append((revision, _event(revision, "segment-updated", b"segment", fragment)))

    for change in changes:
        if change.kind == SEGMENT:
            segment(change.revision, int(change.key), change.projects)
            continue
        project = in_scope(scope, change.key, change.projects)
        if project is None:
            continue
        fragment = catalog.feature(scope, change.key)
        if fragment is None:
            removed = {"featureName": change.key, "project": project}
            events.append((change.revision, _event(change.revision, "feature-removed", removed)))
            continue
        for id in catalog.segments_of(change.key):
            segment(change.revision, id)
        updated = _event(change.revision, "feature-updated", b"feature", fragment)
        events.append((change.revision, updated))
    return events


def _may_hold(scope: Scope, projects: tuple[str, ...]) -> bool:
    """Whether a client of ``scope`` may hold a segment of ``projects`` (none: global)."""
    return scope.projects is None or not projects or any(p in scope.projects for p in projects)


def _event(
    revision: int, kind: str, name: bytes | Mapping[str, object], fragment: bytes = b""
) -> bytes:
    """``{"eventId": revision, "type": kind, name: fragment}``, or with the fields of a
    mapping ``name``."""
    head = b'{"eventId":%d,"type":"%s"' % (revision, kind.encode())
    if isinstance(name, bytes):
        return head + b',"%s":%s}' % (name, fragment)
    return head + b"," + encode(dict(name))[1:]
