"""The Frontend API's answers, pure: a scope's flags evaluated for a caller's context
(``relay.core.frontend_context``, ``relay.core.evaluate``), and the toggles as JSON.

Each scope's flags are compiled once per ETag (``Frontends.scoped``), and each flag's toggle
is rendered once per outcome (enabled, variant): an answer is those fragments joined. A
frontend SDK polls with the same context every 15 s: answers per (scope ETag, context, kind)
are kept while they cannot change (no flag of the scope reads the clock or chance), bounded
in bytes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter, Gauge

from relay.core.catalog import Rendered, encode
from relay.core.errors import Unavailable
from relay.core.evaluate import Compiled, Context, Evaluation, Variant, compile_features
from relay.core.evaluate.constraints import reserved
from relay.core.flag_shapes import tell_unread
from relay.core.memory import measured

log = logging.getLogger(__name__)


MAX_COMPILED = 256
MAX_COMPILED_BYTES = 128 * 1024 * 1024
"""Compiled scopes kept, by the memory each measures (``relay.core.memory``: 2 to 8 times
the bytes of the flags it came from, as their shapes go) and its toggles rendered."""
IN_USE = 60.0
"""A compiled scope asked for within this many seconds (browser SDKs poll every 15 to 30)
is in use: never evicted for another. A scope that does not fit beside those in use is
answered 503 (``Unavailable``) until they leave room, rather than recompiled per request,
which would take every caller's time (two scopes alternating did: 95 answers in 6 s)."""
MAX_REFUSED = 1024
FRAGMENT_OVERHEAD = 150
"""Bytes a rendered toggle holds besides its JSON: its digest, the tuple, the dict's entry."""
MAX_ANSWERS = 100_000
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Kept answers save ~10 % of a repeated context's CPU (bench/frontend.py): worth a small
bound, not the memory of a sidecar."""

ANSWERS = Counter(
    "relay_frontend_answers_total",
    "Frontend API answers by how they were made: evaluated, kept (the same scope and context"
    " answered before), or varying (its evaluation read the clock or chance: never kept)",
    ["source"],
)
COMPILES = Counter(
    "relay_frontend_compiles_total",
    "A scope's flags compiled for evaluation (the Frontend API, OFREP, the playground), per change",
)
REFUSED = Counter(
    "relay_frontend_scopes_refused_total",
    "Frontend API requests answered 503: their scope's compiled flags do not fit beside the"
    " scopes in use (128 MiB a worker)",
)
HELD = Gauge(
    "relay_frontend_held_bytes",
    "Bytes (estimated) of compiled scopes and kept answers of the Frontend API",
    multiprocess_mode="livesum",
)
_EVALUATED, _KEPT, _VARYING = (ANSWERS.labels(s) for s in ("evaluated", "kept", "varying"))


@dataclass(frozen=True, slots=True)
class Answer:
    body: bytes
    etag: str


class Scoped:
    """One scope's flags compiled, and each flag's toggle rendered once per outcome, with
    a digest of it: an answer's ETag hashes the digests of its toggles (16 bytes each),
    not its body (the same answer has the same ETag in every worker and after a restart)."""

    # __weakref__: OFREP's answers are held weakly by their scope's (relay.core.ofrep)
    __slots__ = ("__weakref__", "compiled", "fragments", "query", "size", "used")

    def __init__(self, rendered: Rendered) -> None:
        document = json.loads(rendered.body)
        self.compiled: Compiled = compile_features(document)
        self.query = json.dumps(document.get("query"), sort_keys=True)
        """Which scope this is (a later revision of it replaces it)."""
        self.fragments: dict[int, tuple[bytes, bytes]] = {}
        del document
        self.size = measured(self.compiled, reserved())
        self.used = 0.0  # monotonic: when it was last asked for

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
        self.size += len(fragment) + FRAGMENT_OVERHEAD
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
    return encode(toggle)


class Frontends:
    """Compiled scopes, and the answers that cannot change, both least recently used first
    out and bounded in bytes; compiled scopes in use (``IN_USE``) are never evicted for
    another: one that does not fit beside them is refused (503) until there is room."""

    def __init__(
        self,
        most_compiled: int = MAX_COMPILED,
        compiled_bytes: int = MAX_COMPILED_BYTES,
        most_answers: int = MAX_ANSWERS,
        answer_bytes: int = MAX_ANSWER_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._scoped: OrderedDict[str, Scoped] = OrderedDict()
        self._scoped_bytes = 0
        self._by_query: dict[str, str] = {}  # a scope's query -> the ETag held of it
        self._refused: OrderedDict[str, int] = OrderedDict()  # ETag -> its compiled size
        self._answers: OrderedDict[tuple[str, bool, bytes], Answer] = OrderedDict()
        self._answers_bytes = 0
        self._limits = (most_compiled, compiled_bytes, most_answers, answer_bytes)
        self._clock = clock

    def scoped(self, rendered: Rendered) -> Scoped:
        """``rendered`` compiled: held, or compiled now (and held if it fits beside the
        scopes in use, else answered this once); ``Unavailable`` while one measured too
        large for the room left is refused."""
        now = self._clock()
        found = self._scoped.get(rendered.etag)
        if found is not None:
            found.used = now
            self._scoped.move_to_end(rendered.etag)
            return found
        size = self._refused.get(rendered.etag)
        if size is not None and not self._room(size, now):
            REFUSED.inc()
            raise Unavailable(
                "This key's flags take more memory to evaluate than is left beside the"
                " other keys in use: try again later"
            )
        found = Scoped(rendered)
        found.used = now
        COMPILES.inc()
        tell_unread(found.compiled.unread, 0, etag=rendered.etag)
        self._refused.pop(rendered.etag, None)
        self._drop(self._by_query.get(found.query))  # its earlier revision
        self._make_room(found.size, now)
        most, most_bytes = self._limits[:2]
        if len(self._scoped) < most and self._scoped_bytes + found.size <= most_bytes:
            self._scoped[rendered.etag] = found
            self._by_query[found.query] = rendered.etag
        else:
            self._refuse(rendered.etag, found.size)
        self._scoped_bytes = sum(held.size for held in self._scoped.values())
        HELD.set(self.held)
        return found

    def _make_room(self, size: int, now: float) -> None:
        """Evicts compiled scopes not in use, least recently used first, until ``size``
        more bytes fit (or only scopes in use are left)."""
        most, most_bytes = self._limits[:2]
        self._scoped_bytes = sum(held.size for held in self._scoped.values())
        while self._scoped and (
            len(self._scoped) >= most or self._scoped_bytes + size > most_bytes
        ):
            etag, oldest = next(iter(self._scoped.items()))
            if oldest.used > now - IN_USE:
                return  # it and every later one are in use
            self._drop(etag)

    def _drop(self, etag: str | None) -> None:
        found = None if etag is None else self._scoped.pop(etag, None)
        if found is not None:
            self._scoped_bytes -= found.size
            if self._by_query.get(found.query) == etag:
                del self._by_query[found.query]

    def _room(self, size: int, now: float) -> bool:
        """Whether ``size`` bytes would fit beside the compiled scopes in use."""
        most, most_bytes = self._limits[:2]
        in_use = [held.size for held in self._scoped.values() if held.used > now - IN_USE]
        return len(in_use) < most and sum(in_use) + size <= most_bytes

    def _refuse(self, etag: str, size: int) -> None:
        if etag not in self._refused:
            log.warning(
                "a frontend scope's compiled flags do not fit beside the scopes in use:"
                " its requests are answered 503 until they leave room",
                extra={"etag": etag, "bytes": size, "held_bytes": self._scoped_bytes},
            )
        self._refused[etag] = size
        while len(self._refused) > MAX_REFUSED:
            self._refused.popitem(last=False)

    def answer(self, rendered: Rendered, context: Context, everything: bool) -> Answer:
        key = (rendered.etag, everything, _identity(context))
        found = self._answers.get(key)
        if found is not None:
            _KEPT.inc()
            self._answers.move_to_end(key)
            return found
        found = self.scoped(rendered).answer(context, everything)
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
        """Bytes held: compiled scopes (as measured when compiled, and the toggles rendered
        since the last compile), and answers kept."""
        return self._scoped_bytes + self._answers_bytes


def _identity(context: Context) -> bytes:
    """What of a context can decide an answer that reads neither clock nor chance (nor a
    session the server made up: one that did is never kept), as a digest: the caller
    chooses a context's size (up to a body's limit), never what keeping its answer costs."""
    decisive = (
        context.app_name,
        context.environment,
        context.user_id,
        None if context.session_made_up else context.session_id,
        context.remote_address,
        sorted(context.properties.items()),
    )
    return hashlib.sha256(json.dumps(decisive).encode()).digest()


def _size(answer: Answer) -> int:
    """An answer kept, with its key and its entry: 380 to 465 bytes besides the body,
    measured with tracemalloc, as the table of entries grows in steps."""
    return len(answer.body) + 500
