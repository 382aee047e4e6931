"""A client features document compiled once per revision, and evaluated per context.

Every answer a flag can give is built at compile time (one ``Evaluation`` per strategy and
variant, chosen by weight or by override, per dependency failure), so an evaluation walks
the compiled checks and hands back one of those: no JSON is read and nothing is allocated.
Only ``explain`` (the playground) builds a reason per call, naming each strategy's miss.
"""

from __future__ import annotations

import random
import socket
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from relay.core.evaluate.constraints import Check
from relay.core.evaluate.context import Context, Random
from relay.core.evaluate.outcome import (
    DISABLED,
    DISABLED_ON,
    Basis,
    Decision,
    Evaluation,
    Reason,
    Variant,
)
from relay.core.evaluate.strategies import Rule, compile_rule, compile_segments
from relay.core.evaluate.variants import NONE, VariantSet, compile_variants
from relay.core.flag_shapes import named, problem, segment_problem


def _answers(
    flag: Mapping[str, Any], enabled: bool, reason: Reason, variants: VariantSet | None
) -> tuple[Evaluation, ...]:
    """One evaluation per variant of ``variants`` chosen by weight, one per variant chosen
    by an override (``VariantSet.choose``'s indexes), then (index ``NONE``) one without."""
    name, project = str(flag.get("name", "")), str(flag.get("project") or "default")
    impression = flag.get("impressionData") is True

    def answer(variant: Variant, why: Reason) -> Evaluation:
        return Evaluation(name, project, enabled, variant, impression, why)

    without = answer(DISABLED_ON if enabled else DISABLED, reason)
    if variants is None:
        return (without,)
    basis = reason.basis or Basis.EVERYONE
    by_weight = replace(reason, basis=basis.widest(Basis.SPLIT if variants.split else None))
    by_override = replace(reason, basis=basis.widest(Basis.TARGETED))
    weighed = [answer(v, by_weight) for v in variants.variants]
    overridden = [answer(v, by_override) for v in variants.variants]
    return (*weighed, *overridden, without)


@dataclass(slots=True, eq=False)
class _Strategy:
    checks: tuple[Check, ...]  # its constraints', then its own test (see Rule)
    variants: VariantSet | None  # its own, else the flag's
    matched: tuple[Evaluation, ...]
    rule: Rule


@dataclass(slots=True, eq=False)
class _Dependency:
    parent: _Flag | None
    enabled: bool
    variants: frozenset[str]
    failed: Evaluation  # the child's answer when this dependency is not satisfied

    def satisfied(self, context: Context) -> bool:
        parent = self.parent
        if parent is None or parent.dependencies:
            return False  # missing, or transitive (the SDKs do not follow chains)
        answer = parent.evaluate(context)
        if not self.enabled:
            return not answer.enabled
        if self.variants:
            return answer.enabled and answer.variant.name in self.variants
        return answer.enabled


@dataclass(slots=True, eq=False)
class _Flag:
    name: str
    enabled: bool
    strategies: tuple[_Strategy, ...]
    variants: VariantSet | None
    off: Evaluation
    unconditional: tuple[Evaluation, ...]  # on with no strategy, per variant
    unmatched: Evaluation  # no strategy matched (the misses left out: see explain)
    typed: bool  # some variant of it carries a payload
    dependencies: tuple[_Dependency, ...] = ()

    def evaluate(self, context: Context) -> Evaluation:
        if not self.enabled:
            return self.off
        for dependency in self.dependencies:
            if not dependency.satisfied(context):
                return dependency.failed
        if not self.strategies:
            variants = self.variants
            return self.unconditional[NONE if variants is None else variants.choose(context)]
        for strategy in self.strategies:
            for check in strategy.checks:
                if not check(context):
                    break
            else:
                variants = strategy.variants
                return strategy.matched[NONE if variants is None else variants.choose(context)]
        return self.unmatched

    def explain(self, context: Context) -> Evaluation:
        """``evaluate``, with each strategy's miss when none matched (what the playground
        shows; it costs a list and two objects, which the Frontend API does without). The
        misses are found by a second pass: a strategy left to chance (random stickiness,
        ``gradualRolloutRandom``) may draw differently there and then not be listed."""
        found = self.evaluate(context)
        if found is not self.unmatched:
            return found
        misses = tuple(m for s in self.strategies if (m := s.rule.miss(context)) is not None)
        return replace(found, reason=Reason(Decision.NO_MATCH, misses=misses))


def _compile_flag(
    flag: Mapping[str, Any], segments: Mapping[int, Any], hostname: str, randrange: Random
) -> _Flag:
    name = str(flag.get("name", ""))
    own = compile_variants(flag.get("variants") or (), name, _first_stickiness(flag), randrange)
    strategies = []
    for position, raw in enumerate(flag.get("strategies") or (), start=1):
        params = raw.get("parameters") or {}
        group = str(params.get("groupId", name))
        stickiness = params.get("stickiness")
        variants = compile_variants(raw.get("variants") or (), group, stickiness, randrange)
        rule = compile_rule(raw, position, name, segments, hostname, randrange)
        reason = Reason(Decision.MATCHED, position, str(raw.get("name")), basis=rule.basis)
        matched = _answers(flag, True, reason, variants or own)
        strategies.append(_Strategy(rule.all_checks(), variants or own, matched, rule))
    off = _answers(flag, False, Reason(Decision.OFF), None)[NONE]
    everyone = Reason(Decision.NO_STRATEGIES, basis=Basis.EVERYONE)
    unconditional = _answers(flag, True, everyone, own)
    unmatched = _answers(flag, False, Reason(Decision.NO_MATCH), None)[NONE]
    enabled = flag.get("enabled") is True
    typed = any(
        v.payload is not None
        for found in (own, *(s.variants for s in strategies))
        if found is not None
        for v in found.variants
    )
    return _Flag(name, enabled, tuple(strategies), own, off, unconditional, unmatched, typed)


def _first_stickiness(flag: Mapping[str, Any]) -> str | None:
    variants = flag.get("variants") or ()
    return str(variants[0].get("stickiness") or "default") if variants else None


def _link(flag: _Flag, raw: Mapping[str, Any], flags: Mapping[str, _Flag]) -> None:
    """Resolves ``dependencies`` to the parents' compiled flags (all compiled by now)."""
    dependencies = []
    for dependency in raw.get("dependencies") or ():
        parent_name = str(dependency.get("feature"))
        parent = flags.get(parent_name)
        enabled = dependency.get("enabled") is not False
        variants = frozenset(str(v) for v in dependency.get("variants") or ())
        detail = _dependency_detail(parent, enabled, variants)
        reason = Reason(Decision.PARENT, parent=parent_name, detail=detail)
        failed = _answers(raw, False, reason, None)[NONE]
        dependencies.append(_Dependency(parent, enabled, variants, failed))
    flag.dependencies = tuple(dependencies)


def _dependency_detail(parent: _Flag | None, enabled: bool, variants: frozenset[str]) -> str:
    if parent is None:
        return "does not exist"
    if parent.dependencies:
        return "has dependencies of its own (not followed)"
    if not enabled:
        return "is enabled, and must not be"
    if variants:
        return f"is not enabled with one of the variants {', '.join(sorted(variants))}"
    return "is not enabled"


@dataclass(frozen=True, slots=True)
class Drawn:
    """One flag's answer, as OFREP needs to tell it (``Compiled.drawn``)."""

    evaluation: Evaluation
    nameless: bool  # chance decided it, for want of a userId or sessionId to hash


@dataclass(frozen=True, slots=True)
class Compiled:
    """A document's flags, ready to evaluate. ``restrict`` narrows it to some projects (a
    frontend key's); parents are still found in the whole document."""

    flags: tuple[_Flag, ...]
    by_name: Mapping[str, _Flag]
    unread: tuple[str, ...] = ()
    """The flags and segments left out, each with why (``relay.core.flag_shapes``)."""

    def evaluate(self, context: Context, *, explain: bool = False) -> list[Evaluation]:
        """Every flag, in the document's order. ``explain`` fills a flag's reason with each
        strategy's miss when none matched (else the reason only says none did)."""
        if explain:
            return [flag.explain(context) for flag in self.flags]
        return [flag.evaluate(context) for flag in self.flags]

    def evaluate_one(
        self, name: str, context: Context, *, explain: bool = False
    ) -> Evaluation | None:
        """One flag; None when the document (or the restriction) has no flag of that name."""
        flag = self.by_name.get(name)
        if flag is None:
            return None
        return flag.explain(context) if explain else flag.evaluate(context)

    def drawn(self, context: Context, name: str | None = None) -> Iterator[Drawn]:
        """Every flag (or the one named, if there is one), each with whether chance decided
        its answer because the context names no one (``Context.nameless``: only a context
        without userId and sessionId can have such an answer)."""
        flags = self.flags if name is None else [f for f in (self.by_name.get(name),) if f]
        for flag in flags:
            before = context.nameless_draws
            found = flag.evaluate(context)
            yield Drawn(found, context.nameless_draws != before)

    def typed(self, name: str) -> bool:
        """Whether flag ``name``'s variants carry payloads: OFREP's value is then theirs."""
        flag = self.by_name.get(name)
        return flag is not None and flag.typed

    def restrict(self, projects: Collection[str] | None) -> Compiled:
        """Only the flags of ``projects`` (None: all of them)."""
        if projects is None:
            return self
        wanted = set(projects)
        flags = tuple(f for f in self.flags if f.off.project in wanted)
        return Compiled(flags, {f.name: f for f in flags}, self.unread)


def _readable(
    items: Any,
    wrong: Callable[[Any], str | None],
    called: Callable[[Any, int], str],
    unread: list[str],
) -> list[Mapping[str, Any]]:
    """The ``items`` (a document's list, or None) of a shape ``wrong`` finds nothing wrong
    with; each other one is told in ``unread``, as ``called`` names it, and left out."""
    readable = []
    for place, item in enumerate(items or ()):
        found = wrong(item)
        if found is None:
            readable.append(item)
        else:
            unread.append(f"{called(item, place)}: {found}")
    return readable


def compile_features(
    document: Mapping[str, Any],
    *,
    hostname: str | None = None,
    rng: random.Random | None = None,
) -> Compiled:
    """Compiles the client features format (``GET /api/client/features``: segments as ids in
    a top-level ``segments`` list, or inlined as constraints), once per revision.

    ``hostname`` is what ``applicationHostname`` compares (default: this machine's,
    ``socket.gethostname()``, read here once); ``rng`` is the random source of
    ``gradualRolloutRandom`` and of random stickiness (inject a seeded one in tests). A
    document partly understood still compiles (see the modules' docstrings for each rule);
    a flag or segment of a shape it cannot read is left out (``Compiled.unread``): a
    strategy naming such a segment never matches, as one naming a missing segment.
    """
    host = socket.gethostname() if hostname is None else hostname
    randrange = (rng or random.Random()).randrange
    unread: list[str] = []
    raw_segments = _readable(
        document.get("segments"), segment_problem, lambda _, place: f"segment #{place}", unread
    )
    segments = compile_segments(raw_segments)
    raw_flags = _readable(
        document.get("features"),
        problem,
        lambda feature, place: f"feature {named(feature) or f'#{place}'}",
        unread,
    )
    flags = tuple(_compile_flag(f, segments, host, randrange) for f in raw_flags)
    by_name = {flag.name: flag for flag in flags}
    for flag, raw in zip(flags, raw_flags, strict=True):
        _link(flag, raw, by_name)
    return Compiled(flags, by_name, tuple(unread))
