"""OFREP's answers (the OpenFeature Remote Evaluation Protocol), pure: a context read as
the Frontend API reads one, a scope's flags evaluated by the same evaluator and compiled
form (``relay.core.frontend.Scoped``), each answer rendered once as OFREP's JSON, and the
evaluations counted as SDKs count theirs.

- **Context.** As the Frontend API's (``relay.core.frontend_context.context_of``), with
  ``targetingKey`` the ``userId`` unless the context names one; no ``sessionId`` is made
  up: a flag that would hash a user finds none, and says so (``TARGETING_KEY_MISSING``)
  rather than answering a coin toss that changes at every request.
- **Value.** OFREP has no type in its requests: the flag decides. A flag none of whose
  variants carries a payload is a boolean flag: its value is its enabled state. A flag
  with payloads is a typed flag: its value is the payload of the variant chosen, by its
  type (``string`` and ``csv`` a string, ``number`` a JSON number as written, ``json``
  the document); when it is off, or the strategy that matched gives no variant, there is
  no value and the provider returns the code's default. A payload that does not parse as
  its type is ``PARSE_ERROR``; the provider answers a type the code did not ask for with
  ``TYPE_MISMATCH``: nothing is converted.
- **Reason** (``Decision`` and ``Basis``): ``DISABLED`` off in the environment;
  ``DEFAULT`` no strategy matched, or a parent flag's condition did not hold (the flag's
  default: off); otherwise ``SPLIT`` when a hash shared users out (a rollout under 100 %,
  a variant by weight among several), ``TARGETING_MATCH`` when the context's fields
  decided (constraints, segments, a list of users or addresses, a variant's override),
  ``STATIC`` when everyone gets the same. **Variant**: the chosen variant's name, else
  ``enabled`` or ``disabled``.
- **Bulk answers** list a scope's flags in the client features' order; their ETag hashes
  the digests of the answers they list (as the Frontend API's), so the same answers have
  the same ETag in every worker and after a restart. Each answer is rendered once per
  compiled scope, and lives as long as the Frontend API's cache holds that scope.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter as CounterOf
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from weakref import WeakKeyDictionary

from prometheus_client import Counter

from relay.core.catalog import encode
from relay.core.evaluate import Basis, Compiled, Context, Decision, Evaluation
from relay.core.frontend import Scoped
from relay.core.frontend_context import context_of, from_model
from relay.core.ingest_batch import Counts, MetricKey
from relay.wire.common import MAX_COUNT
from relay.wire.ofrep import FailureCode, OfrepContext

MAX_APPS = 100
"""Applications (and hours) a worker counts for one API key between two writes: the app
name is the caller's to choose, so past it the key's evaluations are not counted (and that
is), until the write it calls for. Each holds at most one count per answer of its scope."""
MAX_FLAGS_KEPT = 1_000
"""Flags per application whose counts wait for a write that failed, at most."""

DROPPED = Counter(
    "relay_ofrep_counts_dropped_total",
    "OFREP evaluations not counted: a key's share of the tally was full (too many application"
    " names at once), or a count would pass its limit",
)

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_DIGITS = 4300  # Python's own limit on converting text to int (sys.int_info)


def context(given: OfrepContext, caller: str | None, now: datetime) -> Context:
    """The context OFREP's ``given`` is evaluated for (see the module's docstring)."""
    targeting = given.targetingKey
    if targeting is not None and targeting != "" and given.userId in (None, ""):
        given = given.model_copy(update={"userId": targeting})
    fields, properties = from_model(given)
    return context_of(fields, properties, caller, now, session=lambda: None)


def reason(evaluation: Evaluation) -> str:
    """OFREP's ``reason`` for an answer (see the module's docstring)."""
    match evaluation.reason.decision:
        case Decision.OFF:
            return "DISABLED"
        case Decision.NO_MATCH | Decision.PARENT:
            return "DEFAULT"
        case Decision.MATCHED | Decision.NO_STRATEGIES:
            match evaluation.reason.basis:
                case Basis.SPLIT:
                    return "SPLIT"
                case Basis.TARGETED:
                    return "TARGETING_MATCH"
                case _:
                    return "STATIC"


class Unparsable(ValueError):
    """A payload that does not parse as its type."""


_NO_VALUE = object()


def value(evaluation: Evaluation, typed: bool) -> Any:
    """The answer's value, ``_NO_VALUE`` for the code's default; ``Unparsable``."""
    if not typed:
        return evaluation.enabled
    payload = evaluation.variant.payload if evaluation.variant.enabled else None
    if payload is None:
        return _NO_VALUE
    kind, text = payload["type"], payload["value"]
    match kind:
        case "string" | "csv":
            return text
        case "number":
            return _number(text)
        case "json":
            try:
                return json.loads(text, parse_constant=_not_json)
            except (ValueError, RecursionError):
                raise Unparsable(f"its json payload does not parse: {text[:80]!r}") from None
        case _:
            raise Unparsable(f"its payload's type {kind[:40]!r} is none OpenFeature has")


def _number(text: str) -> int | float:
    stripped = text.strip()
    if _NUMBER.fullmatch(stripped) is None:
        raise Unparsable(f"its number payload is not a number: {text[:80]!r}")
    if stripped.lstrip("-").isdigit() and len(stripped) <= _MAX_DIGITS:
        return int(stripped)
    number = float(stripped)
    if number in (float("inf"), float("-inf")):
        raise Unparsable(f"its number payload is out of range: {text[:80]!r}")
    return number


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


def _json(item: Mapping[str, Any]) -> bytes:
    return encode(item, allow_nan=False)


@dataclass(frozen=True, slots=True, eq=False)
class Outcome:
    """One flag's answer as OFREP gives it: its JSON object, 16 bytes of that object's
    SHA-256 (what a bulk ETag hashes), and the failure's code and details if it is one,
    else the evaluation it answers (what is counted). Built once per outcome and compared
    by identity: a request's answers are counted by adding them to a ``Counter``."""

    fragment: bytes
    digest: bytes
    error: tuple[FailureCode, str] | None = None
    evaluation: Evaluation | None = None


def _outcome(item: Mapping[str, Any], evaluation: Evaluation | None = None) -> Outcome:
    try:
        fragment = _json(item)
    except (ValueError, RecursionError):  # a payload too deep to write back
        return _failure(str(item["key"]), "PARSE_ERROR", "its json payload is too deep")
    return Outcome(fragment, hashlib.sha256(fragment).digest()[:16], None, evaluation)


def _failure(key: str, code: FailureCode, details: str) -> Outcome:
    item = {"key": key, "errorCode": code, "errorDetails": details}
    fragment = _json(item)
    return Outcome(fragment, hashlib.sha256(fragment).digest()[:16], (code, details))


def _rendered(evaluation: Evaluation, typed: bool) -> Outcome:
    name = evaluation.name
    try:
        found = value(evaluation, typed)
    except Unparsable as exc:
        return _failure(name, "PARSE_ERROR", f"Flag '{name}': {exc}")
    variant = evaluation.variant
    shown = variant.name if variant.enabled else "enabled" if evaluation.enabled else "disabled"
    item: dict[str, Any] = {"key": name, "reason": reason(evaluation), "variant": shown}
    if found is not _NO_VALUE:
        item["value"] = found
    return _outcome(item, evaluation)


def _keyless(name: str) -> Outcome:
    return _failure(
        name,
        "TARGETING_KEY_MISSING",
        f"Flag '{name}' shares users out by hashing their targetingKey (or sessionId):"
        " the context has neither",
    )


@dataclass(frozen=True, slots=True)
class Bulk:
    body: bytes
    etag: str
    answered: list[Outcome]
    """The answers given (not the failures): what is counted."""


class Answers:
    """Each answer of one compiled scope rendered once, by the evaluation it renders (the
    evaluator answers with evaluations built once per compiled scope): the compiled scope
    (``Scoped``) is the caller's, held by the Frontend API's cache."""

    __slots__ = ("keyless", "outcomes")

    def __init__(self) -> None:
        self.outcomes: dict[int, Outcome] = {}
        self.keyless: dict[str, Outcome] = {}

    def _answer(self, evaluation: Evaluation, compiled: Compiled) -> Outcome:
        found = self.outcomes.get(id(evaluation))
        if found is None:
            typed = compiled.typed(evaluation.name)
            found = self.outcomes[id(evaluation)] = _rendered(evaluation, typed)
        return found

    def _keyless(self, name: str) -> Outcome:
        found = self.keyless.get(name)
        if found is None:
            found = self.keyless[name] = _keyless(name)
        return found

    def _outcomes(
        self, compiled: Compiled, context: Context, everything: bool, name: str | None = None
    ) -> list[Outcome]:
        """Each flag's answer (or the one named's): every flag's (``everything``) or the
        enabled ones'. A context that names someone (a userId or a sessionId) has no answer
        left to chance for want of one: it is evaluated as the Frontend API's, without
        watching each flag's draws."""
        if context.user_id is None and context.session_id is None:
            return [
                self._keyless(d.evaluation.name)
                if d.nameless
                else self._answer(d.evaluation, compiled)
                for d in compiled.drawn(context, name)
                if everything or d.evaluation.enabled
            ]
        if name is None:
            found = compiled.evaluate(context)
        else:
            one = compiled.evaluate_one(name, context)
            found = [] if one is None else [one]
        held, answer = self.outcomes.get, self._answer
        return [held(id(e)) or answer(e, compiled) for e in found if everything or e.enabled]

    def bulk(self, scoped: Scoped, context: Context, everything: bool, after: bytes = b"") -> Bulk:
        """Every flag (``everything``), or the enabled ones; ``after``: JSON members the
        body ends with (``eventStreams``), not part of the ETag."""
        outcomes = self._outcomes(scoped.compiled, context, everything)
        flags = b",".join([outcome.fragment for outcome in outcomes])
        body = b'{"flags":[' + flags + b"]" + (b"," + after if after else b"") + b"}"
        digest = hashlib.sha256(b"".join([outcome.digest for outcome in outcomes]))
        answered = [outcome for outcome in outcomes if outcome.error is None]
        return Bulk(body, f'"{digest.hexdigest()[:32]}"', answered)

    def one(self, scoped: Scoped, context: Context, name: str) -> Outcome | None:
        """The flag ``name``'s answer; None: the scope has no such flag."""
        found = self._outcomes(scoped.compiled, context, True, name)
        return found[0] if found else None


class Ofreps:
    """The rendered answers of each compiled scope the Frontend API's cache holds, for as
    long as it holds it (weakly keyed: a scope it lets go, by a change or its bounds, takes
    its answers with it), so OFREP holds no compiled scope of its own."""

    def __init__(self) -> None:
        self._held: WeakKeyDictionary[Scoped, Answers] = WeakKeyDictionary()

    def __len__(self) -> int:
        return len(self._held)

    def of(self, scoped: Scoped) -> Answers:
        found = self._held.get(scoped)
        if found is None:
            found = self._held[scoped] = Answers()
        return found


class Tally:
    """OFREP's evaluations counted per (app, environment, flag, UTC hour) until written:
    SDKs count the evaluations they make and post them; OFREP's are made here, so they
    are counted here, and written through the ingest path as an SDK's would be.

    Counted by answer: each is built once per compiled scope (its flag, state and variant),
    so a request adds its list of them to a ``Counter`` (by identity, in C; they are held
    until written), and the counts per flag are made at ``take``, once a second, not per
    request. The app is the caller's to name, so each key (``owner``: its hash) has its own
    share of ``most`` applications: a key that names more has the rest of its evaluations
    not counted (``DROPPED``), never another key's. A full share says so (``overflowing``):
    the caller writes at once rather than at the next second. Counts whose write failed are
    kept, as counts, for the next."""

    def __init__(self, most: int = MAX_APPS) -> None:
        self.most = most
        self.overflowing = False
        self._shares: dict[str, dict[tuple[str, str, int], CounterOf[Outcome]]] = {}
        self._failed: dict[MetricKey, Counts] = {}

    def add(
        self, owner: str, app: str, environment: str, hour: int, answered: list[Outcome]
    ) -> None:
        share = self._shares.setdefault(owner, {})
        group = (app, environment, hour)
        counted = share.get(group)
        if counted is None:
            if len(share) >= self.most:
                self.overflowing = True
                DROPPED.inc(len(answered))
                return
            counted = share[group] = CounterOf()
        counted.update(answered)

    def take(self) -> dict[MetricKey, Counts]:
        """The counts per key of every share; the tally empty again."""
        shares, self._shares, self.overflowing = self._shares, {}, False
        taken, self._failed = self._failed, {}
        for share in shares.values():
            for (app, environment, hour), counted in share.items():
                for outcome, times in counted.items():
                    evaluation = outcome.evaluation
                    if evaluation is None:  # a failure: nothing was answered
                        continue
                    key = MetricKey(app, environment, evaluation.name, hour)
                    yes = times if evaluation.enabled else 0
                    variant = evaluation.variant
                    variants = {variant.name: times} if variant.enabled else {}
                    _add(taken, key, yes, times - yes, variants)
        return taken

    def put_back(self, taken: Mapping[MetricKey, Counts]) -> None:
        """Counts whose write failed, for the next one (as many keys as a share holds)."""
        for key, counts in taken.items():
            if key not in self._failed and len(self._failed) >= self.most * MAX_FLAGS_KEPT:
                DROPPED.inc(counts.yes + counts.no)
                continue
            _add(self._failed, key, counts.yes, counts.no, counts.variants)


def _add(
    counts: dict[MetricKey, Counts], key: MetricKey, yes: int, no: int, variants: Mapping[str, int]
) -> None:
    """Adds to ``key``'s counts; what would take a count past its limit is not counted."""
    found = counts.get(key)
    if found is None:
        found = counts[key] = Counts()
    if max(found.yes + yes, found.no + no) > MAX_COUNT:
        DROPPED.inc(yes + no)
        return
    found.add(yes, no, dict(variants))


def stream_event(revision: int) -> bytes:
    """An SSE message telling a provider to fetch its flags again (``refetchEvaluation``);
    ``etag`` and ``id`` are the scope's revision, which the provider sends back as
    ``flagConfigEtag`` (and ``Last-Event-ID`` when it reconnects)."""
    data = _json({"type": "refetchEvaluation", "etag": str(revision)})
    return b"id: %d\nevent: message\ndata: %s\n\n" % (revision, data)
