"""Feature flags as the domain sees them: a snapshot of every flag, its state per
environment, its strategies and the segments they use, and the rules Unleash applies when
strategies are saved (defaults of ``flexibleRollout``, variant weights, the strategy a flag
gets when it is turned on with none).

A snapshot is what the client API renders from (``relay.core.client_features``); its
``revision`` is the number every flag or segment write increments, so one integer says
whether a rendered answer is still current.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from relay.core.errors import InvalidInput
from relay.wire.strategies import Strategy, StrategyVariant, WeightType

FLEXIBLE_ROLLOUT = "flexibleRollout"

Document = dict[str, Any]
"""A constraint or variant as stored and served: the JSON object of its wire model."""


@dataclass(frozen=True, slots=True)
class StrategyRecord:
    id: str
    name: str
    title: str | None
    disabled: bool
    sort_order: int
    constraints: tuple[Document, ...]
    parameters: Mapping[str, str]
    variants: tuple[Document, ...]
    segments: tuple[int, ...]

    def order(self) -> tuple[int, str]:
        """Unleash's order of strategies: by sort order, then by id (ids sort by creation)."""
        return self.sort_order, self.id


MAX_ENVIRONMENT_BYTES = 256 * 1024
"""What one flag's strategies and variants in one environment may hold, as stored JSON
(their names, titles, constraints, parameters, variants; the flag's own variants there):
the flag as an SDK of that environment gets it.
POST, PUT and PATCH are held to it alike, and a JSON Patch's copies to as much."""


@dataclass(frozen=True, slots=True)
class EnvironmentState:
    enabled: bool = False
    strategies: tuple[StrategyRecord, ...] = ()
    variants: tuple[Document, ...] = ()
    """The flag's own variants here (Unleash's environment variants), weights fixed."""


@dataclass(frozen=True, slots=True)
class Dependency:
    """A flag's dependency on its parent: the parent must be enabled (or, when not
    ``enabled``, disabled), and when ``variants`` are named, resolve to one of them."""

    parent: str
    enabled: bool
    variants: tuple[str, ...]

    def served(self) -> Document:
        """As Unleash serves it: ``variants`` only when the parent must be enabled."""
        out: Document = {"feature": self.parent, "enabled": self.enabled}
        if self.enabled:
            out["variants"] = list(self.variants)
        return out


_OFF = EnvironmentState()


@dataclass(frozen=True, slots=True)
class FlagRecord:
    name: str
    project: str
    type: str
    description: str | None
    stale: bool
    impression_data: bool
    created_at: float
    archived_at: float | None
    revision: int
    """The revision of the last write to this flag, in any environment."""
    environments: Mapping[str, EnvironmentState] = field(default_factory=dict)
    dependencies: tuple[Dependency, ...] = ()
    """Its parent (Unleash allows one)."""
    children: tuple[str, ...] = ()
    """The flags that depend on it, by name."""

    def environment(self, name: str) -> EnvironmentState:
        """A flag has no record in an environment it was never changed in: it is off there."""
        return self.environments.get(name, _OFF)


@dataclass(frozen=True, slots=True)
class SegmentRecord:
    id: int
    name: str
    description: str | None
    project: str | None
    constraints: tuple[Document, ...]
    created_at: float
    revision: int


@dataclass(frozen=True, slots=True)
class FlagState:
    revision: int
    flags: tuple[FlagRecord, ...]
    """Sorted by name; archived ones included (they still decide a scope's revision)."""
    segments: Mapping[int, SegmentRecord]


def with_defaults(flag: str, strategy: Strategy) -> Strategy:
    """What Unleash saves for a strategy: ``flexibleRollout`` gets rollout 100, stickiness
    ``default`` and the flag's name as ``groupId`` where they are missing or empty;
    variants get their weights fixed (``fix_weights``)."""
    params = dict(strategy.parameters)
    if strategy.name == FLEXIBLE_ROLLOUT:
        params.setdefault("rollout", "100")
        params["stickiness"] = params.get("stickiness") or "default"
        params["groupId"] = params.get("groupId") or flag
    return strategy.model_copy(
        update={"parameters": params, "variants": fix_weights(strategy.variants)}
    )


def strategy_on(flag: str, project_default: Strategy | None) -> Strategy:
    """The strategy a flag gets when turned on in an environment where it has none (or only
    disabled ones): the project environment's default strategy, else ``flexibleRollout``
    at 100 %. An empty ``groupId`` becomes the flag's name."""
    if project_default is None:
        return Strategy(name=FLEXIBLE_ROLLOUT, parameters={})
    params = dict(project_default.parameters)
    if "groupId" in params and not params["groupId"]:
        params["groupId"] = flag
    return project_default.model_copy(update={"parameters": params, "sortOrder": None})


Variant = TypeVar("Variant", bound=StrategyVariant)


def fix_weights(variants: Sequence[Variant]) -> list[Variant]:
    """Unleash's weights: ``fix`` variants keep theirs, ``variable`` ones share the rest of
    1000 (the remainder to the first of them), and the list is sorted by name."""
    if not variants:
        return []
    names = [v.name for v in variants]
    if len(set(names)) != len(names):
        raise InvalidInput("Variant names must be unique within a strategy")
    variable = [v for v in variants if v.weightType is WeightType.VARIABLE]
    if not variable:
        raise InvalidInput('There must be at least one "variable" variant')
    fixed = [v for v in variants if v.weightType is WeightType.FIX]
    rest = 1000 - sum(v.weight for v in fixed)
    if rest < 0:
        raise InvalidInput("The traffic distribution total must equal 100%")
    share, remainder = divmod(rest, len(variable))
    shared = [
        v.model_copy(update={"weight": share + (1 if i < remainder else 0)})
        for i, v in enumerate(variable)
    ]
    return sorted([*shared, *fixed], key=lambda v: v.name)


_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def new_strategy_id() -> str:
    """A ULID (as Unleash's strategy ids): 48 bits of milliseconds then 80 random bits, in
    Crockford base 32, so ids sort by creation and break sort-order ties that way."""
    value = (time.time_ns() // 1_000_000) << 80 | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))
