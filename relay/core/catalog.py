"""A scope's flags held as pre-rendered JSON fragments, from which the answer to any query
(``project``, ``namePrefix``, one name) is put together by concatenation.

Rendering a flag (building its document, serializing it) is the costly part of an answer:
a catalog does it once per flag, when the flags change, so the work of one request is
proportional to what it returns: a ``namePrefix`` is a binary search in the names sorted,
a ``project`` a dictionary lookup, one name another, and a query that matches nothing
costs O(log n) whatever the scope's size.

The ETag is a hash over the query and the fragments' own hashes (each computed once), so it
is a function of the answer's content (``meta`` aside): the same answer has the same ETag,
in both modes, and any change in what the key sees changes it.
"""

from __future__ import annotations

import hashlib
import json
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

FORMAT_VERSION = 2
PIECE_OVERHEAD = 200
"""Bytes a catalog holds per flag besides its fragment (its name, indexes, hash): what
``Catalog.size`` adds, for the caches that bound catalogs by bytes."""


@dataclass(frozen=True, slots=True)
class Scope:
    environment: str
    projects: tuple[str, ...] | None
    """Sorted project ids the answer is limited to; None for every project."""
    name_prefix: str | None
    inline_segments: bool


@dataclass(frozen=True, slots=True)
class Rendered:
    body: bytes
    etag: str
    revision: int
    features: int = 0
    """How many flag fragments the answer was put together from (its features)."""


@dataclass(frozen=True, slots=True)
class Piece:
    """One flag of a catalog; an archived one has no fragment (it still decides the
    revision of the scopes it is in)."""

    name: str
    project: str
    revision: int
    fragment: bytes | None
    segments: tuple[int, ...]
    """The segment ids its strategies use."""
    digest: bytes = b""

    @classmethod
    def of(cls, name: str, project: str, revision: int, feature: Any, segments: Any) -> Piece:
        fragment = None if feature is None else encode(feature)
        digest = b"" if fragment is None else hashlib.sha256(fragment).digest()
        return cls(name, project, revision, fragment, tuple(sorted(segments)), digest)


@dataclass(frozen=True, slots=True)
class SegmentPiece:
    fragment: bytes
    revision: int
    digest: bytes

    @classmethod
    def of(cls, segment: Any, revision: int) -> SegmentPiece:
        fragment = encode(segment)
        return cls(fragment, revision, hashlib.sha256(fragment).digest())


class _Index:
    """Flags of a catalog (all, or one project's) by name: the names sorted, the flags'
    positions in answer order alongside, and where those positions stop following each
    other, so that a range of names is a few runs of consecutive flags."""

    __slots__ = ("breaks", "names", "positions")

    def __init__(self, names: list[str], positions: list[int]) -> None:
        self.names = names
        self.positions = positions
        self.breaks = [j for j in range(len(positions) - 1) if positions[j + 1] != positions[j] + 1]

    def runs(self, prefix: str | None) -> list[tuple[int, int]]:
        """The runs ``[start, end)`` of positions of the names with ``prefix`` (all without
        one): a binary search, then one step per run."""
        start, end = 0, len(self.names)
        if prefix is not None:
            start = bisect_left(self.names, prefix)
            # past ``start``, the names with the prefix come first: it is a range
            end = bisect_left(self.names, True, lo=start, key=lambda n: not n.startswith(prefix))
        if start >= end:
            return []
        at, runs = self.positions, []
        breaks = self.breaks[bisect_left(self.breaks, start) : bisect_left(self.breaks, end - 1)]
        for k in breaks:
            runs.append((at[start], at[k] + 1))
            start = k + 1
        runs.append((at[start], at[end - 1] + 1))
        return runs


class Catalog:
    """The flags of one scope (environment, projects a key may see, segments as ids or
    inlined), each rendered once, indexed by name and by project.

    The fragments are held end to end in answer order, each followed by a comma, with
    their hashes likewise: the flags a query selects are runs of consecutive flags (one for
    a prefix when answers list flags by name, as they do), each copied as one slice."""

    __slots__ = (
        "_blob",
        "_by_name",
        "_digests",
        "_everything",
        "_floor",
        "_inline",
        "_live_before",
        "_project_at",
        "_projects",
        "_revisions",
        "_segment_users",
        "_segments",
        "_segments_of",
        "_starts",
        "size",
    )

    def __init__(
        self,
        pieces: Sequence[Piece],
        segments: Mapping[int, SegmentPiece],
        inline: bool,
        floor: int = 0,
    ) -> None:
        """``pieces`` in the order answers list them; ``floor``: the least revision of an
        answer (a relay's upstream's, whose own flags have none)."""
        self._segments = segments
        self._inline = inline
        self._floor = floor
        live = [p for p in pieces if p.fragment is not None]
        self._blob = b"".join(part for p in live for part in (p.fragment or b"", b","))
        self._digests = b"".join(p.digest for p in live)
        widths = (0 if p.fragment is None else len(p.fragment) + 1 for p in pieces)
        self._starts = list(accumulate(widths, initial=0))  # an archived flag takes no room
        self._live_before = list(accumulate((p.fragment is not None for p in pieces), initial=0))
        self._revisions = [p.revision for p in pieces]
        self._project_at = [p.project for p in pieces]
        self._segment_users = [i for i, p in enumerate(pieces) if p.fragment and p.segments]
        self._segments_of = {i: pieces[i].segments for i in self._segment_users}
        order = sorted(range(len(pieces)), key=lambda i: pieces[i].name)
        self._everything = _Index([pieces[i].name for i in order], order)
        grouped: dict[str, list[int]] = {}
        for i in order:
            grouped.setdefault(pieces[i].project, []).append(i)
        self._projects = {
            project: _Index([pieces[i].name for i in at], at) for project, at in grouped.items()
        }
        self._by_name: dict[str, int] = {}
        for i, piece in enumerate(pieces):
            self._by_name.setdefault(piece.name, i)  # the first of a name, as SDKs read it
        held = len(self._blob) + len(self._digests) + PIECE_OVERHEAD * len(pieces)
        self.size = held + sum(len(s.fragment) for s in segments.values())

    def answer(self, scope: Scope) -> Rendered:
        """``scope``'s answer, from the fragments it selects: the same bytes and ETag for
        the same flags and query, however they are asked."""
        runs = self._runs(scope)
        live_before, digests = self._live_before, memoryview(self._digests)
        features, count, used = self._selected(runs)
        revisions = [self._floor, *(max(self._revisions[a:b]) for a, b in runs)]
        revision = max(revisions + [self._segments[i].revision for i in used])
        query = encode(_query(scope))
        digest = hashlib.sha256(b"%s\n%d\n" % (query, count))
        for a, b in runs:
            digest.update(digests[32 * live_before[a] : 32 * live_before[b]])
        parts: list[bytes | memoryview] = [b'{"version":%d,"features":[' % FORMAT_VERSION]
        parts += [*features, b'],"query":', query]
        if not self._inline:
            digest.update(b"".join(self._segments[i].digest for i in used))
            segments = b",".join(self._segments[i].fragment for i in used)
            parts += [b',"segments":[', segments, b"]"]
        etag = f'"{digest.hexdigest()[:32]}"'
        query_hash = hashlib.sha256(query).hexdigest()[:16]
        meta = {"revisionId": revision, "etag": etag, "queryHash": query_hash}
        parts += [b',"meta":', encode(meta), b"}"]
        return Rendered(b"".join(parts), etag, revision, count)

    def documents(self, scope: Scope) -> tuple[list[bytes | memoryview], list[bytes]]:
        """The features (comma-separated slices) and segments of ``scope``'s answer: a
        delta's hydration holds exactly what the answer holds."""
        features, _, used = self._selected(self._runs(scope))
        return features, [self._segments[i].fragment for i in used]

    def used_segments(self, scope: Scope) -> set[int]:
        """The ids of the segments ``scope``'s answer carries."""
        return {i for i in self._segment_ids(self._runs(scope)) if i in self._segments}

    def segment(self, id: int) -> bytes | None:
        """A segment's fragment, None when the catalog has no such segment."""
        found = self._segments.get(id)
        return None if found is None else found.fragment

    def segments_of(self, name: str) -> tuple[int, ...]:
        """The segment ids the flag named ``name`` uses (none when it has no fragment)."""
        at = self._by_name.get(name)
        return () if at is None else self._segments_of.get(at, ())

    def _selected(
        self, runs: list[tuple[int, int]]
    ) -> tuple[list[bytes | memoryview], int, list[int]]:
        """The fragments of ``runs`` (comma-separated), how many, and the sorted ids of
        the segments they use."""
        starts, live_before, blob = self._starts, self._live_before, memoryview(self._blob)
        features: list[bytes | memoryview] = [
            blob[starts[a] : starts[b]] for a, b in runs if starts[a] != starts[b]
        ]
        if features:
            features[-1] = features[-1][:-1]  # the comma after the last
        count = sum(live_before[b] - live_before[a] for a, b in runs)
        used = sorted(i for i in self._segment_ids(runs) if i in self._segments)
        return features, count, used

    def feature(self, scope: Scope, name: str) -> bytes | None:
        """``GET /api/client/features/{name}``: the flag's fragment as in ``scope``'s
        answer, None when that answer does not have it."""
        at = self._by_name.get(name)
        if at is None or self._starts[at] == self._starts[at + 1]:  # none, or archived
            return None
        if scope.projects is not None and self._project_at[at] not in scope.projects:
            return None
        if scope.name_prefix is not None and not name.startswith(scope.name_prefix):
            return None
        return self._blob[self._starts[at] : self._starts[at + 1] - 1]

    def _runs(self, scope: Scope) -> list[tuple[int, int]]:
        """The flags in ``scope`` as runs of positions, in answer order: per index (every
        project, or each project asked), those of the names with the prefix."""
        if scope.projects is None:
            indexes = [self._everything]
        else:
            indexes = [self._projects[p] for p in scope.projects if p in self._projects]
        return sorted(run for index in indexes for run in index.runs(scope.name_prefix))

    def _segment_ids(self, runs: list[tuple[int, int]]) -> set[int]:
        """The segments the flags of ``runs`` use: only flags that use some are visited."""
        users, used = self._segment_users, set[int]()
        for a, b in runs:
            for i in users[bisect_left(users, a) : bisect_left(users, b)]:
                used.update(self._segments_of[i])
        return used


def _query(scope: Scope) -> dict[str, Any]:
    query: dict[str, Any] = {}
    if scope.projects is not None:
        query["project"] = list(scope.projects)
    if scope.name_prefix is not None:
        query["namePrefix"] = scope.name_prefix
    query["environment"] = scope.environment
    query["inlineSegmentConstraints"] = scope.inline_segments
    return query


def encode(value: Any, allow_nan: bool = True) -> bytes:
    """JSON as answers carry it: compact, UTF-8. A string that is not Unicode (a lone
    surrogate, which a file's or an upstream's ``\\ud800`` escape spells) has no UTF-8: the
    answer is then all ASCII, that string escaped as it came, rather than no answer."""
    compact = (",", ":")
    try:
        return json.dumps(
            value, separators=compact, ensure_ascii=False, allow_nan=allow_nan
        ).encode()
    except UnicodeEncodeError:
        return json.dumps(value, separators=compact, allow_nan=allow_nan).encode()
