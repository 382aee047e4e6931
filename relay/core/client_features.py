"""What one API key sees of the flags: ``GET /api/client/features`` rendered from a
snapshot, for one scope (the key's projects and environment, the query's filters, and
whether the SDK resolves segments itself).

Pure: each flag is rendered once into a catalog (``relay.core.catalog``) per environment and
segment form, and every answer is put together from it; a relay builds its catalogs from its
upstream's answer (``from_answer``). The ETag is a hash of everything in the answer but
``meta`` (which carries the ETag itself), so it changes exactly when what the key sees
changes, whatever else in the service was written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from relay.core.catalog import Catalog, Piece, Rendered, Scope, SegmentPiece
from relay.core.errors import InvalidInput
from relay.core.flag_shapes import named, problem, segment_problem
from relay.core.flags import Document, FlagRecord, FlagState, SegmentRecord, StrategyRecord
from relay.wire.strategies import semver

__all__ = ["Answer", "Catalog", "Rendered", "Scope", "catalog", "from_answer", "read", "render"]

# Unleash-Client-Spec from which an SDK resolves segment ids itself (Unleash's threshold)
SEGMENTS_SPEC = (4, 2, 0)


@dataclass(frozen=True, slots=True)
class Unread:
    """A feature or segment of an answer that cannot be read (``relay.core.flag_shapes``):
    left out of the answer read."""

    key: str | int | None  # a feature's name, a segment's id; None when it has none
    place: int  # where it was in the document's list
    why: str
    segment: bool = False

    def __str__(self) -> str:
        what = "segment" if self.segment else "feature"
        return f"{what} {self.key if self.key is not None else f'#{self.place}'}: {self.why}"


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer read back (from an upstream): what ``from_answer`` catalogs."""

    features: list[Document]
    segments: dict[int, Document]
    revision: int
    unread: tuple[Unread, ...] = ()
    """What was left out; ``mended`` puts a last good copy of it back where there is one."""
    kept: tuple[Unread, ...] = ()
    """What of ``unread`` ``mended`` kept a last good copy of."""


def inline_segments(client_spec: str | None) -> bool:
    """True when an SDK's ``Unleash-Client-Spec`` predates segments (or is absent), so their
    constraints must be inlined; a header that is no strict SemVer is refused, as Unleash
    does."""
    if client_spec is None:
        return True
    version = semver(client_spec)
    if version is None:
        raise InvalidInput(
            f'Invalid SemVer in the Unleash-Client-Spec header: "{client_spec}"',
            "/header/Unleash-Client-Spec",
        )
    major, minor, patch, prerelease = version
    release = (major, minor, patch)
    return release < SEGMENTS_SPEC or (release == SEGMENTS_SPEC and bool(prerelease))


def projects_of(granted: Iterable[str], asked: Iterable[str]) -> tuple[str, ...] | None:
    """The projects a key sees: those it is granted (``*`` for all), narrowed to the ones a
    ``project`` query parameter asks for. None means every project."""
    granted_set = set(granted)
    asked_set = set(asked)
    if "*" in granted_set:
        return tuple(sorted(asked_set)) if asked_set else None
    return tuple(sorted(granted_set & asked_set if asked_set else granted_set))


def render(state: FlagState, scope: Scope) -> Rendered:
    """``scope``'s answer from a snapshot (the central service keeps the catalog instead)."""
    return catalog(state, scope.environment, scope.inline_segments).answer(scope)


def catalog(state: FlagState, environment: str, inline: bool) -> Catalog:
    """Every flag of a snapshot as ``environment`` serves it, segments as ids or inlined
    (``inline``): the central service's answers are all put together from it. Archived
    flags are in it without a fragment: they still decide their scopes' revision."""
    segments = {i: _segment(s) for i, s in state.segments.items()}
    pieces = []
    for flag in state.flags:
        if flag.archived_at is not None:
            pieces.append(Piece.of(flag.name, flag.project, flag.revision, None, ()))
            continue
        feature = _feature(flag, environment)
        ids = _segment_ids([feature])
        served = _inlined(feature, segments) if inline else feature
        pieces.append(Piece.of(flag.name, flag.project, flag.revision, served, ids))
    return Catalog(pieces, _segment_pieces(state.segments), inline)


def from_answer(answer: Answer, inline: bool) -> Catalog:
    """A catalog of an answer read back (an upstream's, or a relay's own copy of one): its
    features as they are, or with segments inlined, all at the answer's revision."""
    pieces = []
    for feature in answer.features:
        ids = _segment_ids([feature])
        served = _inlined(feature, answer.segments) if inline else feature
        project = feature.get("project", "default")
        pieces.append(Piece.of(feature["name"], project, 0, served, ids))
    segments = {i: SegmentPiece.of(s, 0) for i, s in sorted(answer.segments.items())}
    return Catalog(pieces, segments, inline, answer.revision)


def _segment_pieces(segments: Mapping[int, SegmentRecord]) -> dict[int, SegmentPiece]:
    return {i: SegmentPiece.of(_segment(s), s.revision) for i, s in sorted(segments.items())}


def read(body: bytes) -> Answer:
    """An answer of this format (an upstream's), checked for what rendering and evaluating
    rely on: ``ValueError`` when it is not one. A feature or segment of a shape that cannot
    be read costs only itself: it is left out (``Answer.unread``). Everything else is kept
    as it is, so fields this service does not know (``dependencies``...) reach SDKs."""
    content = json.loads(body, parse_constant=_no_constant)
    if not isinstance(content, dict):
        raise ValueError("not a client features answer")
    raw_features = content.get("features")
    if not isinstance(raw_features, list):
        raise ValueError("features is not a list")
    raw_segments = content.get("segments", [])
    if not isinstance(raw_segments, list):
        raise ValueError("segments is not a list")
    unread: list[Unread] = []
    features = []
    for place, feature in enumerate(raw_features):
        wrong = problem(feature)
        if wrong is None:
            features.append(feature)
        else:
            unread.append(Unread(named(feature), place, wrong))
    segments: dict[int, Document] = {}
    for place, segment in enumerate(raw_segments):
        wrong = segment_problem(segment)
        if wrong is None:
            segments[segment["id"]] = segment
        else:
            id = segment.get("id") if isinstance(segment, dict) else None
            key = id if isinstance(id, int) and not isinstance(id, bool) else None
            unread.append(Unread(key, place, wrong, segment=True))
    meta = content.get("meta")
    revision = meta.get("revisionId") if isinstance(meta, dict) else None
    if not isinstance(revision, int) or isinstance(revision, bool):
        revision = 0
    return Answer(features, segments, revision, tuple(unread))


def mended(answer: Answer, last: Answer | None) -> Answer:
    """``answer`` with the last good copy (in ``last``: the answer held before) of each
    feature and segment it could not read, in its place; those ``last`` has none of stay
    left out (``Answer.kept`` says which were kept)."""
    if not answer.unread or last is None:
        return answer
    held = {f["name"]: f for f in last.features}
    unread = {u.place: u for u in answer.unread if not u.segment}
    features, good, kept = [], iter(answer.features), []
    for place in range(len(answer.features) + len(unread)):
        missing = unread.get(place)
        if missing is None:
            features.append(next(good))
        elif isinstance(missing.key, str) and missing.key in held:
            features.append(held[missing.key])
            kept.append(missing)
    segments = dict(answer.segments)
    for missing in answer.unread:
        if missing.segment and isinstance(missing.key, int) and missing.key in last.segments:
            segments[missing.key] = last.segments[missing.key]
            kept.append(missing)
    return Answer(features, segments, answer.revision, answer.unread, tuple(kept))


def _served(flag: FlagRecord, environment: str) -> list[StrategyRecord]:
    """Disabled strategies are left out of the client API, the rest served in order."""
    strategies = flag.environment(environment).strategies
    return sorted((s for s in strategies if not s.disabled), key=StrategyRecord.order)


def _feature(flag: FlagRecord, environment: str) -> Document:
    """A flag as SDKs that resolve segments get it; ``dependencies`` only when it has a
    parent, as Unleash serves it."""
    state = flag.environment(environment)
    feature: Document = {
        "name": flag.name,
        "type": flag.type,
        "enabled": state.enabled,
        "project": flag.project,
        "stale": flag.stale,
        "strategies": [_strategy(s) for s in _served(flag, environment)],
        "variants": list(state.variants),
        "description": flag.description,
        "impressionData": flag.impression_data,
    }
    if flag.dependencies:
        feature["dependencies"] = [d.served() for d in flag.dependencies]
    return feature


def _strategy(strategy: StrategyRecord) -> Document:
    out: Document = {
        "name": strategy.name,
        "constraints": list(strategy.constraints),
        "parameters": dict(strategy.parameters),
        "variants": list(strategy.variants),
    }
    if strategy.segments:
        out["segments"] = sorted(strategy.segments)
    return out


def _inlined(feature: Document, segments: Mapping[int, Document]) -> Document:
    """A feature for SDKs older than segments: each strategy's segments' constraints added
    to its own, and no segment ids."""
    strategies = []
    for strategy in feature.get("strategies", ()):
        out = {k: v for k, v in strategy.items() if k != "segments"}
        ids = strategy.get("segments", ())
        if ids:
            out["constraints"] = [
                *strategy.get("constraints", ()),
                *(c for i in ids if i in segments for c in segments[i]["constraints"]),
            ]
        strategies.append(out)
    return {**feature, "strategies": strategies}


def _segment_ids(features: Iterable[Document]) -> set[int]:
    return {i for f in features for s in f.get("strategies", ()) for i in s.get("segments", ())}


def _segment(segment: SegmentRecord) -> Document:
    return {"id": segment.id, "name": segment.name, "constraints": list(segment.constraints)}


def _no_constant(name: str) -> Any:
    """``NaN`` and ``Infinity`` are not JSON: passed on, SDKs could not parse the answer."""
    raise ValueError(f"{name} is not JSON")
