"""The Frontend API's answers, pure: a caller's context read as Unleash reads it, a scope's
flags evaluated for it (``relay.core.evaluate``), and the toggles as JSON.

- **Context** (Unleash's ``createContext``): ``appName``, ``environment``, ``userId``,
  ``sessionId`` and ``remoteAddress`` are fields, an empty one is absent; every other key,
  and those under ``properties``, are properties (``properties`` wins on a clash).
  ``currentTime`` is a property like any other: date constraints use the server's clock.
  Absent, ``remoteAddress`` is the caller's address and ``sessionId`` a fresh random one;
  ``appName`` and ``environment`` default to what Unleash's own evaluation client has
  (``frontend-api``, ``default``).
- **Answers.** Each scope's flags are compiled once per ETag (``Frontends.compiled``), and
  each flag's toggle is rendered once per outcome (enabled, variant): an answer is those
  fragments joined. A frontend SDK polls with the same context every 15 s: answers per
  (scope ETag, context, kind) are kept while they cannot change (no flag of the scope reads
  the clock or chance), bounded in bytes.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import unquote

from prometheus_client import Counter, Gauge

from relay.core.catalog import Rendered
from relay.core.evaluate import Compiled, Context, Evaluation, Variant, compile_features
from relay.wire.frontend import FrontendContext

FIELDS = ("appName", "environment", "userId", "sessionId", "remoteAddress")
DEFAULT_APP = "frontend-api"
DEFAULT_ENVIRONMENT = "default"

MAX_COMPILED = 256
MAX_COMPILED_BYTES = 128 * 1024 * 1024
COMPILED_PER_BYTE = 8
"""Compiled scopes kept, by an estimate of their memory: a compiled form (with its rendered
toggles) takes about 8 times the bytes of the answer it came from (measured with
tracemalloc on bench/evaluate.py's 100-flag document: 114 kB -> 0.9 MB)."""
MAX_ANSWERS = 100_000
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Kept answers save ~10 % of a repeated context's CPU (bench/frontend.py): worth a small
bound, not the memory of a sidecar."""

Fields = dict[str, str]

ANSWERS = Counter(
    "relay_frontend_answers_total",
    "Frontend API answers by how they were made: evaluated, kept (the same scope and context"
    " answered before), or varying (its evaluation read the clock or chance: never kept)",
    ["source"],
)
COMPILES = Counter(
    "relay_frontend_compiles_total",
    "A scope's flags compiled for evaluation (the Frontend API, OFREP, the playground), per"
    " change",
)
HELD = Gauge(
    "relay_frontend_held_bytes",
    "Bytes (estimated) of compiled scopes and kept answers of the Frontend API",
    multiprocess_mode="livesum",
)
_EVALUATED, _KEPT, _VARYING = (ANSWERS.labels(s) for s in ("evaluated", "kept", "varying"))


def _text(value: object) -> str | None:
    """A context value as its text, as JavaScript's ``String`` writes it; None is absent."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def from_pairs(pairs: Iterable[tuple[str, str]]) -> tuple[Fields, Fields]:
    """A query's ``(fields, properties)``: ``properties[name]=value`` and unknown keys are
    properties; a key given twice counts once, first wins (as ``qs`` would make it a list,
    which no constraint matches)."""
    fields: Fields = {}
    rest: Fields = {}
    given: Fields = {}
    for key, value in pairs:
        if key in FIELDS:
            fields.setdefault(key, value)
        elif key.startswith("properties[") and key.endswith("]"):
            given.setdefault(key[11:-1], value)
        else:
            rest.setdefault(key, value)
    return fields, rest | given


def from_query(raw: str) -> tuple[Fields, Fields]:
    """``from_pairs`` of a raw query string, decoded as ``urllib.parse.parse_qsl`` with
    blank values kept decodes it (``+`` a space, ``%XX`` UTF-8 with replacement), but only
    the pieces that need it: a browser's query is parsed on every request, and
    ``parse_qsl``'s generality cost as much as the rest of a cached answer."""
    return from_pairs(_pair(piece) for piece in raw.split("&") if piece)


def _pair(piece: str) -> tuple[str, str]:
    name, _, value = piece.partition("=")
    return _decoded(name), _decoded(value)


def _decoded(text: str) -> str:
    if "+" in text:
        text = text.replace("+", " ")
    return unquote(text) if "%" in text else text


def from_model(context: FrontendContext) -> tuple[Fields, Fields]:
    """A parsed context (a ``POST`` body's, the playground's) as ``(fields, properties)``,
    values as text."""
    known = {k: t for k in FIELDS if (t := _text(getattr(context, k))) is not None}
    merged = {**context.extra, **(context.properties or {})}
    return known, {k: t for k, v in merged.items() if (t := _text(v)) is not None}


def context_of(
    fields: Fields,
    properties: Fields,
    caller: str | None,
    now: datetime,
    session: Callable[[], str | None] = lambda: secrets.token_hex(18),
) -> Context:
    """The context evaluated: empty fields absent, the caller's address and a fresh
    session where none was given (Unleash's ``enrichContextWithIp``; the playground gives
    no session, to show what a context without one gets)."""

    def field(name: str) -> str | None:
        return fields.get(name) or None

    return Context(
        app_name=field("appName") or DEFAULT_APP,
        environment=field("environment") or DEFAULT_ENVIRONMENT,
        user_id=field("userId"),
        session_id=field("sessionId") or session(),
        remote_address=field("remoteAddress") or caller,
        current_time=now,
        properties=properties,
    )


@dataclass(frozen=True, slots=True)
class Answer:
    body: bytes
    etag: str


class Scoped:
    """One scope's flags compiled, and each flag's toggle rendered once per outcome, with
    a digest of it: an answer's ETag hashes the digests of its toggles (16 bytes each),
    not its body (the same answer has the same ETag in every worker and after a restart)."""

    __slots__ = ("__weakref__", "compiled", "fragments", "size")  # OFREP's answers: weakly

    def __init__(self, rendered: Rendered) -> None:
        document = json.loads(rendered.body)
        self.compiled: Compiled = compile_features(document)
        self.fragments: dict[int, tuple[bytes, bytes]] = {}
        self.size = len(rendered.body) * COMPILED_PER_BYTE

    def answer(self, context: Context, everything: bool) -> Answer:
        fragments, render = self.fragments, self._render
        parts = [
            fragments.get(id(evaluation)) or render(evaluation)
            for evaluation in self.compiled.evaluate(context)
            if everything or evaluation.enabled
        ]
        body = b'{"toggles":[' + b",".join([part[0] for part in parts]) + b"]}"
        digest = hashlib.sha256(b"".join([part[1] for part in parts])).hexdigest()
        return Answer(body, f'"{digest[:32]}"')

    def one(self, context: Context, name: str) -> bytes | None:
        evaluation = self.compiled.evaluate_one(name, context)
        if evaluation is None:
            return None
        return (self.fragments.get(id(evaluation)) or self._render(evaluation))[0]

    def _render(self, evaluation: Evaluation) -> tuple[bytes, bytes]:
        """Keyed by identity: the evaluator answers with evaluations it built when it
        compiled (one per outcome), which live as long as ``compiled``."""
        fragment = _toggle(evaluation)
        found = self.fragments[id(evaluation)] = (fragment, hashlib.sha256(fragment).digest()[:16])
        return found


def shown_variant(variant: Variant) -> dict[str, Any]:
    """A variant as the Frontend API answers it (and ``relay flags evaluate`` prints it)."""
    shown: dict[str, Any] = {"name": variant.name, "enabled": variant.enabled}
    if variant.payload is not None:
        shown["payload"] = {"type": variant.payload["type"], "value": variant.payload["value"]}
    shown["feature_enabled"] = shown["featureEnabled"] = variant.feature_enabled
    return shown


def _toggle(evaluation: Evaluation) -> bytes:
    toggle = {
        "name": evaluation.name,
        "enabled": evaluation.enabled,
        "variant": shown_variant(evaluation.variant),
        "impressionData": evaluation.impression_data,
    }
    return json.dumps(toggle, ensure_ascii=False, separators=(",", ":")).encode()


class Frontends:
    """Compiled scopes by ETag, and the answers that cannot change, both least recently
    used first out and bounded in bytes."""

    def __init__(
        self,
        most_compiled: int = MAX_COMPILED,
        compiled_bytes: int = MAX_COMPILED_BYTES,
        most_answers: int = MAX_ANSWERS,
        answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self._scoped: OrderedDict[str, Scoped] = OrderedDict()
        self._scoped_bytes = 0
        self._answers: OrderedDict[tuple[str, bool, bytes], Answer] = OrderedDict()
        self._answers_bytes = 0
        self._limits = (most_compiled, compiled_bytes, most_answers, answer_bytes)

    def scoped(self, rendered: Rendered) -> Scoped:
        found = self._scoped.get(rendered.etag)
        if found is not None:
            self._scoped.move_to_end(rendered.etag)
            return found
        found = self._scoped[rendered.etag] = Scoped(rendered)
        COMPILES.inc()
        self._scoped_bytes += found.size
        most, most_bytes = self._limits[:2]
        while len(self._scoped) > 1 and (
            len(self._scoped) > most or self._scoped_bytes > most_bytes
        ):
            self._scoped_bytes -= self._scoped.popitem(last=False)[1].size
        HELD.set(self.held)
        return found

    def answer(self, rendered: Rendered, context: Context, everything: bool) -> Answer:
        scoped = self.scoped(rendered)
        key = (rendered.etag, everything, _identity(context))
        found = self._answers.get(key)
        if found is not None:
            _KEPT.inc()
            self._answers.move_to_end(key)
            return found
        found = scoped.answer(context, everything)
        if context.varies:
            _VARYING.inc()
            return found
        _EVALUATED.inc()
        self._answers[key] = found
        self._answers_bytes += _size(found)
        most, most_bytes = self._limits[2:]
        while self._answers and (len(self._answers) > most or self._answers_bytes > most_bytes):
            self._answers_bytes -= _size(self._answers.popitem(last=False)[1])
        HELD.set(self.held)
        return found

    @property
    def held(self) -> int:
        """Bytes held (estimated): compiled scopes, and answers kept."""
        return self._scoped_bytes + self._answers_bytes


def _identity(context: Context) -> bytes:
    """What of a context can decide an answer that reads neither clock nor chance, as a
    digest: the caller chooses a context's size (up to a body's limit), never what keeping
    its answer costs."""
    decisive = (
        context.app_name,
        context.environment,
        context.user_id,
        context.session_id,
        context.remote_address,
        sorted(context.properties.items()),
    )
    return hashlib.sha256(json.dumps(decisive).encode()).digest()


def _size(answer: Answer) -> int:
    """An answer kept, with its key and its entry: 380 to 465 bytes besides the body,
    measured with tracemalloc, as the table of entries grows in steps."""
    return len(answer.body) + 500
