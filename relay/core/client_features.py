"""What one API key sees of the flags: ``GET /api/client/features`` rendered from a
snapshot, for one scope (the key's projects and environment, the query's filters, and
whether the SDK resolves segments itself).

Pure: the central service renders each scope once per revision and serves the bytes; a
relay can cache exactly these bytes. The ETag is a hash of everything in the answer but
``meta`` (which carries the ETag itself), so it changes exactly when what the key sees
changes, whatever else in the service was written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from relay.core.errors import InvalidInput
from relay.core.flags import Document, FlagRecord, FlagState, SegmentRecord, StrategyRecord
from relay.wire.strategies import semver

FORMAT_VERSION = 2
# Unleash-Client-Spec from which an SDK resolves segment ids itself (Unleash's threshold)
SEGMENTS_SPEC = (4, 2, 0)


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


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer read back (from an upstream): what ``document`` renders scopes from."""

    features: list[Document]
    segments: dict[int, Document]
    revision: int


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
    return release < SEGMENTS_SPEC or (release == SEGMENTS_SPEC and prerelease)


def projects_of(granted: Iterable[str], asked: Iterable[str]) -> tuple[str, ...] | None:
    """The projects a key sees: those it is granted (``*`` for all), narrowed to the ones a
    ``project`` query parameter asks for. None means every project."""
    granted_set = set(granted)
    asked_set = set(asked)
    if "*" in granted_set:
        return tuple(sorted(asked_set)) if asked_set else None
    return tuple(sorted(granted_set & asked_set if asked_set else granted_set))


def render(state: FlagState, scope: Scope) -> Rendered:
    in_scope = [f for f in state.flags if _in_scope(f.name, f.project, scope)]
    live = [f for f in in_scope if f.archived_at is None]
    used = {s for f in live for strategy in _served(f, scope) for s in strategy.segments}
    segments = {i: state.segments[i] for i in sorted(used) if i in state.segments}
    revision = max(
        [f.revision for f in in_scope] + [s.revision for s in segments.values()], default=0
    )
    features = [_feature(f, scope) for f in live]
    return document(features, {i: _segment(s) for i, s in segments.items()}, scope, revision)


def document(
    features: Sequence[Document], segments: Mapping[int, Document], scope: Scope, revision: int
) -> Rendered:
    """The answer for ``scope`` from its features as SDKs that resolve segments get them
    (segment ids in strategies) and the segments by id: the segments they use listed, or,
    for older SDKs, their constraints inlined. The central service renders its snapshot
    through here, and a relay the copy it holds of its upstream's answer."""
    served = [_inlined(f, segments) for f in features] if scope.inline_segments else features
    content: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "features": list(served),
        "query": _query(scope),
    }
    if not scope.inline_segments:
        used = sorted(_segment_ids(features))
        content["segments"] = [segments[i] for i in used if i in segments]
    etag = f'"{_digest(content)[:32]}"'
    content["meta"] = {
        "revisionId": revision,
        "etag": etag,
        "queryHash": _digest(content["query"])[:16],
    }
    return Rendered(_json(content), etag, revision)


def read(body: bytes) -> Answer:
    """An answer of this format (an upstream's), checked for what rendering relies on:
    ``ValueError`` when it is not one. Everything else in it is kept as it is, so fields
    this service does not know (``dependencies``...) reach SDKs all the same."""
    content = json.loads(body, parse_constant=_no_constant)
    if not isinstance(content, dict):
        raise ValueError("not a client features answer")
    features = _list(content, "features", required=True)
    for feature in features:
        if not isinstance(feature.get("name"), str):
            raise ValueError("a feature without a name")
        if not isinstance(feature.get("project", ""), str):
            raise ValueError("a feature whose project is not a string")
        for strategy in _list(feature, "strategies"):
            _list(strategy, "constraints")
            _ids(_list(strategy, "segments", of=int))
    segments = {}
    for segment in _list(content, "segments"):
        [segment_id] = _ids([segment.get("id")])
        _list(segment, "constraints", required=True)
        segments[segment_id] = segment
    meta = content.get("meta")
    revision = meta.get("revisionId") if isinstance(meta, dict) else None
    if not isinstance(revision, int) or isinstance(revision, bool):
        revision = 0
    return Answer(features, segments, revision)


def _list(parent: Document, name: str, required: bool = False, of: type[Any] = dict) -> list[Any]:
    """``parent[name]``, a list of ``of`` (absent: empty unless ``required``)."""
    value = parent.get(name, None if required else [])
    if not isinstance(value, list) or not all(isinstance(item, of) for item in value):
        raise ValueError(f"{name} is not a list of {of.__name__}")
    return value


def _ids(values: list[Any]) -> list[int]:
    if not all(_id(v) for v in values):
        raise ValueError("an id that is not an integer")
    return values


def _id(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def narrowed(features: Sequence[Document], scope: Scope) -> list[Document]:
    """The features of an answer that ``scope``'s projects and name prefix select."""
    return [f for f in features if _in_scope(f["name"], f.get("project", "default"), scope)]


def client_feature(state: FlagState, scope: Scope, name: str) -> dict[str, Any] | None:
    """``GET /api/client/features/{name}``: one flag as in the full answer, None when the key
    does not see it (or it is archived)."""
    for flag in state.flags:
        if flag.name == name and flag.archived_at is None and _in_scope(name, flag.project, scope):
            feature = _feature(flag, scope)
            if not scope.inline_segments:
                return feature
            ids = _segment_ids([feature])
            used = {i: _segment(state.segments[i]) for i in ids if i in state.segments}
            return _inlined(feature, used)
    return None


def _in_scope(name: str, project: str, scope: Scope) -> bool:
    if scope.projects is not None and project not in scope.projects:
        return False
    return scope.name_prefix is None or name.startswith(scope.name_prefix)


def _served(flag: FlagRecord, scope: Scope) -> list[StrategyRecord]:
    """Disabled strategies are left out of the client API, the rest served in order."""
    strategies = flag.environment(scope.environment).strategies
    return sorted((s for s in strategies if not s.disabled), key=StrategyRecord.order)


def _feature(flag: FlagRecord, scope: Scope) -> Document:
    """A flag as SDKs that resolve segments get it."""
    return {
        "name": flag.name,
        "type": flag.type,
        "enabled": flag.environment(scope.environment).enabled,
        "project": flag.project,
        "stale": flag.stale,
        "strategies": [_strategy(s) for s in _served(flag, scope)],
        "variants": [],
        "description": flag.description,
        "impressionData": flag.impression_data,
    }


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


def _query(scope: Scope) -> dict[str, Any]:
    query: dict[str, Any] = {}
    if scope.projects is not None:
        query["project"] = list(scope.projects)
    if scope.name_prefix is not None:
        query["namePrefix"] = scope.name_prefix
    query["environment"] = scope.environment
    query["inlineSegmentConstraints"] = scope.inline_segments
    return query


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _no_constant(name: str) -> Any:
    """``NaN`` and ``Infinity`` are not JSON: passed on, SDKs could not parse the answer."""
    raise ValueError(f"{name} is not JSON")


def _digest(value: Any) -> str:
    return hashlib.sha256(_json(value)).hexdigest()
