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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from relay.core.errors import InvalidInput
from relay.core.flags import FlagRecord, FlagState, SegmentRecord, StrategyRecord
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
    in_scope = [f for f in state.flags if _in_scope(f, scope)]
    live = [f for f in in_scope if f.archived_at is None]
    features = [_feature(f, scope, state.segments) for f in live]
    used = sorted({s for f in live for strategy in _served(f, scope) for s in strategy.segments})
    segments = [state.segments[i] for i in used if i in state.segments]
    content: dict[str, Any] = {
        "version": FORMAT_VERSION,
        "features": features,
        "query": _query(scope),
    }
    if not scope.inline_segments:
        content["segments"] = [_segment(s) for s in segments]
    etag = f'"{_digest(content)[:32]}"'
    revision = max([f.revision for f in in_scope] + [s.revision for s in segments], default=0)
    content["meta"] = {
        "revisionId": revision,
        "etag": etag,
        "queryHash": _digest(content["query"])[:16],
    }
    return Rendered(_json(content), etag, revision)


def client_feature(state: FlagState, scope: Scope, name: str) -> dict[str, Any] | None:
    """``GET /api/client/features/{name}``: one flag as in the full answer, None when the key
    does not see it (or it is archived)."""
    for flag in state.flags:
        if flag.name == name and flag.archived_at is None and _in_scope(flag, scope):
            return _feature(flag, scope, state.segments)
    return None


def _in_scope(flag: FlagRecord, scope: Scope) -> bool:
    if scope.projects is not None and flag.project not in scope.projects:
        return False
    return scope.name_prefix is None or flag.name.startswith(scope.name_prefix)


def _served(flag: FlagRecord, scope: Scope) -> list[StrategyRecord]:
    """Disabled strategies are left out of the client API, the rest served in order."""
    strategies = flag.environment(scope.environment).strategies
    return sorted((s for s in strategies if not s.disabled), key=StrategyRecord.order)


def _feature(
    flag: FlagRecord, scope: Scope, segments: Mapping[int, SegmentRecord]
) -> dict[str, Any]:
    return {
        "name": flag.name,
        "type": flag.type,
        "enabled": flag.environment(scope.environment).enabled,
        "project": flag.project,
        "stale": flag.stale,
        "strategies": [_strategy(s, scope, segments) for s in _served(flag, scope)],
        "variants": [],
        "description": flag.description,
        "impressionData": flag.impression_data,
    }


def _strategy(
    strategy: StrategyRecord, scope: Scope, segments: Mapping[int, SegmentRecord]
) -> dict[str, Any]:
    constraints = list(strategy.constraints)
    out: dict[str, Any] = {"name": strategy.name, "constraints": constraints}
    out["parameters"] = dict(strategy.parameters)
    out["variants"] = list(strategy.variants)
    if scope.inline_segments:
        for segment_id in strategy.segments:
            if segment_id in segments:
                constraints.extend(segments[segment_id].constraints)
    elif strategy.segments:
        out["segments"] = sorted(strategy.segments)
    return out


def _segment(segment: SegmentRecord) -> dict[str, Any]:
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


def _digest(value: Any) -> str:
    return hashlib.sha256(_json(value)).hexdigest()
