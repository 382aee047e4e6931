"""What an evaluation answers: the flag's state, its variant, and the reason a person can read.

Every value here is built once per compiled revision and handed out as is (an evaluation
allocates nothing in the common case), so they are frozen.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum


class Decision(StrEnum):
    """What decided a flag's state, the first thing the playground shows."""

    OFF = "off"  # the flag is disabled in this environment
    PARENT = "parent"  # a dependency on a parent flag is not satisfied
    NO_STRATEGIES = "no strategies"  # on with no strategy: on for everyone
    MATCHED = "matched"  # a strategy matched (the first one in order)
    NO_MATCH = "no match"  # no strategy matched


class Basis(StrEnum):
    """Whom a matched answer goes to, from the strategy and the variant that gave it (what
    OFREP's ``reason`` tells): everyone alike (nothing of the context decided it), those
    the context's fields target (constraints, segments, a list of users or addresses, a
    variant's override), or a share of them drawn by hashing (a rollout under 100 %, one
    variant by weight among several). Ordered: a split of a targeted answer is a split."""

    EVERYONE = "everyone"
    TARGETED = "targeted"
    SPLIT = "split"

    def widest(self, other: Basis | None) -> Basis:
        """The wider of two bases (``other`` None: this one)."""
        order = (Basis.EVERYONE, Basis.TARGETED, Basis.SPLIT)
        return self if other is None or order.index(self) >= order.index(other) else other


@dataclass(frozen=True, slots=True, eq=False)
class Miss:
    """Why one strategy did not match: a constraint (its own or a segment's) that failed, or
    the strategy's own rule (``constraint`` None). Compared by identity: each is built once."""

    strategy: int  # 1-based position among the flag's strategies
    strategy_name: str
    detail: str
    constraint: int | None = None  # 1-based position among the strategy's constraints
    context_name: str | None = None
    operator: str | None = None
    segment: int | None = None  # the segment the constraint comes from

    def __str__(self) -> str:
        where = f"strategy {self.strategy} {self.strategy_name}"
        if self.constraint is None:
            return f"{where}: {self.detail}"
        of_segment = f" of segment {self.segment}" if self.segment is not None else ""
        return (
            f"constraint {self.constraint} on {self.context_name} ({self.operator}){of_segment}"
            f" failed in {where}"
        )


@dataclass(frozen=True, slots=True, eq=False)
class Reason:
    """Why a flag is in its state: ``str()`` is one line for people, the fields are for
    programs (the strategy that matched, the parent, each strategy's miss)."""

    decision: Decision
    strategy: int | None = None
    strategy_name: str | None = None
    parent: str | None = None
    detail: str | None = None
    misses: tuple[Miss, ...] = ()
    basis: Basis | None = None
    """Whom the answer goes to, for an enabled one (``MATCHED``, ``NO_STRATEGIES``)."""

    def __str__(self) -> str:
        match self.decision:
            case Decision.OFF:
                return "disabled in this environment"
            case Decision.PARENT:
                return f"parent flag {self.parent} {self.detail}"
            case Decision.NO_STRATEGIES:
                return "enabled, no strategies"
            case Decision.MATCHED:
                return f"strategy {self.strategy} {self.strategy_name} matched"
            case Decision.NO_MATCH:
                return "; ".join(str(miss) for miss in self.misses) or "no strategy matched"


@dataclass(frozen=True, slots=True)
class Variant:
    """A flag's variant as the SDKs answer it: ``disabled`` when the flag is off or has none."""

    name: str
    enabled: bool
    payload: Mapping[str, str] | None
    feature_enabled: bool


DISABLED = Variant("disabled", False, None, False)
DISABLED_ON = Variant("disabled", False, None, True)


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One flag evaluated for one context."""

    name: str
    project: str
    enabled: bool
    variant: Variant
    impression_data: bool
    reason: Reason
