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


class Catalog:
    """The flags of one scope (environment, projects a key may see, segments as ids or
    inlined), each rendered once, indexed by name and by project."""

    __slots__ = (
        "_by_name",
        "_everything",
        "_floor",
        "_inline",
        "_pieces",
        "_projects",
        "_segments",
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
        self._pieces = pieces
        self._segments = segments
        self._inline = inline
        self._floor = floor
        order = sorted(range(len(pieces)), key=lambda i: pieces[i].name)
        self._everything = ([pieces[i].name for i in order], order)
        grouped: dict[str, list[int]] = {}
        for i in order:
            grouped.setdefault(pieces[i].project, []).append(i)
        self._projects = {p: ([pieces[i].name for i in at], at) for p, at in grouped.items()}
        self._by_name: dict[str, int] = {}
        for i, piece in enumerate(pieces):
            self._by_name.setdefault(piece.name, i)  # the first of a name, as SDKs read it
        fragments = [*(p.fragment or b"" for p in pieces), *(s.fragment for s in segments.values())]
        self.size = sum(map(len, fragments)) + PIECE_OVERHEAD * len(pieces)

    def answer(self, scope: Scope) -> Rendered:
        """``scope``'s answer, from the fragments it selects: the same bytes and ETag for
        the same flags and query, however they are asked."""
        picked = [self._pieces[i] for i in self._select(scope)]
        live = [p for p in picked if p.fragment is not None]
        used = sorted({i for p in live for i in p.segments if i in self._segments})
        revision = max(
            [self._floor, *(p.revision for p in picked)]
            + [self._segments[i].revision for i in used]
        )
        query = encode(_query(scope))
        digest = hashlib.sha256(b"%s\n%d\n" % (query, len(live)))
        digest.update(b"".join(p.digest for p in live))
        parts = [b'{"version":%d,"features":[' % FORMAT_VERSION]
        parts.append(b",".join(p.fragment for p in live if p.fragment is not None))
        parts += [b'],"query":', query]
        if not self._inline:
            digest.update(b"".join(self._segments[i].digest for i in used))
            segments = b",".join(self._segments[i].fragment for i in used)
            parts += [b',"segments":[', segments, b"]"]
        etag = f'"{digest.hexdigest()[:32]}"'
        query_hash = hashlib.sha256(query).hexdigest()[:16]
        meta = {"revisionId": revision, "etag": etag, "queryHash": query_hash}
        parts += [b',"meta":', encode(meta), b"}"]
        return Rendered(b"".join(parts), etag, revision, len(live))

    def feature(self, scope: Scope, name: str) -> bytes | None:
        """``GET /api/client/features/{name}``: the flag's fragment as in ``scope``'s
        answer, None when that answer does not have it."""
        at = self._by_name.get(name)
        if at is None:
            return None
        piece = self._pieces[at]
        if scope.projects is not None and piece.project not in scope.projects:
            return None
        if scope.name_prefix is not None and not name.startswith(scope.name_prefix):
            return None
        return piece.fragment

    def _select(self, scope: Scope) -> list[int]:
        """Positions of the flags in ``scope``, in answer order: per index (every project,
        or each project asked), the range of names with the prefix."""
        if scope.projects is None:
            indexes = [self._everything]
        else:
            indexes = [self._projects[p] for p in scope.projects if p in self._projects]
        prefix = scope.name_prefix
        picked: list[int] = []
        for names, positions in indexes:
            if prefix is None:
                picked += positions
                continue
            start = bisect_left(names, prefix)
            # past ``start``, the names with the prefix come first: it is a range
            end = bisect_left(names, True, lo=start, key=lambda n: not n.startswith(prefix))
            picked += positions[start:end]
        picked.sort()
        return picked


def _query(scope: Scope) -> dict[str, Any]:
    query: dict[str, Any] = {}
    if scope.projects is not None:
        query["project"] = list(scope.projects)
    if scope.name_prefix is not None:
        query["namePrefix"] = scope.name_prefix
    query["environment"] = scope.environment
    query["inlineSegmentConstraints"] = scope.inline_segments
    return query


def encode(value: Any) -> bytes:
    """JSON as answers carry it: compact, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
