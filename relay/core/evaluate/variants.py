"""Variants: a flag's own (with overrides) or a strategy's, one chosen by weight from a
MurmurHash3 of ``"{groupId}:{stickiness value}"`` (seed 86028157), as the SDKs choose.

The stickiness of a flag's variants is its first variant's; of a strategy's variants, the
strategy's ``stickiness`` parameter; ``groupId`` is the flag's name, or the strategy's
``groupId`` parameter. With no stickiness value in the context the point is random (the
injected source): the SDKs do the same.

``choose`` tells a variant chosen by an override from one chosen by weight (an index past
the variants: ``by_override``), so that each has its own answer (and ``Basis``); a set with
one variant of positive weight hands it out without drawing (the draw could not change it).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from relay.core.evaluate.context import Context, Getter, Random, getter, variant_stickiness
from relay.core.evaluate.hashing import variant_point
from relay.core.evaluate.outcome import Variant

NONE = -1  # no variant: the "disabled" variant of an enabled flag


@dataclass(frozen=True, slots=True)
class VariantSet:
    """Variants to choose from, in order; ``choose`` answers an index into ``variants``
    (chosen by weight), ``len(variants)`` past it (chosen by an override), or ``NONE``."""

    variants: tuple[Variant, ...]
    overrides: tuple[tuple[int, Getter, frozenset[str]], ...]
    running: tuple[int, ...]  # the running total of the weights
    prefix: str
    stickiness: Getter
    randrange: Random
    first: int  # the first variant of positive weight: where a draw of 1 lands
    split: bool  # whether the weights share users out among several variants

    def by_override(self, index: int) -> int:
        return len(self.variants) + index

    def choose(self, context: Context) -> int:
        for index, read, values in self.overrides:
            if read(context) in values:
                return self.by_override(index)
        total = self.running[-1]
        if total <= 0:
            return NONE
        if not self.split:  # one variant has all the weight: a draw cannot change it
            return self.first
        value = self.stickiness(context)
        if value is None:
            context.varied()
            point = self.randrange(1, total + 1)
        else:
            point = variant_point(self.prefix, value, total)
        return bisect_left(self.running, point)


def compile_variants(
    raw: Sequence[Mapping[str, Any]], group: str, stickiness: str | None, randrange: Random
) -> VariantSet | None:
    """The variants of ``raw``; None when there are none (the flag's own apply instead)."""
    if not raw:
        return None
    variants = tuple(
        Variant(str(v.get("name")), True, _payload(v.get("payload")), True) for v in raw
    )
    overrides = tuple(
        (index, getter(str(o.get("contextName"))), frozenset(str(x) for x in o.get("values") or ()))
        for index, v in enumerate(raw)
        for o in v.get("overrides") or ()
    )
    running = tuple(accumulate(max(int(v.get("weight") or 0), 0) for v in raw))
    weighted = sum(1 for before, at in zip((0, *running), running, strict=False) if at > before)
    return VariantSet(
        variants,
        overrides,
        running,
        group + ":",
        variant_stickiness(stickiness),
        randrange,
        bisect_left(running, 1),
        weighted > 1,
    )


def _payload(raw: Any) -> Mapping[str, str] | None:
    if not isinstance(raw, Mapping):
        return None
    return {"type": str(raw.get("type")), "value": str(raw.get("value"))}
