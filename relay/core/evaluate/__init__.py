"""Unleash's evaluation rules, on our side: a client features document compiled once per
revision (``compile_features``), then evaluated for a context (``Compiled.evaluate``), as
the SDKs (yggdrasil, the Node SDK) evaluate it. Pure: no I/O, the clock and the random
source are the caller's.

Modules: ``context`` (the context, what a ``contextName`` reads), ``constraints``
(operators), ``strategies`` (built-in strategies, segments), ``variants`` (weights,
stickiness, overrides), ``hashing`` (MurmurHash3 normalisation), ``outcome`` (evaluations
and reasons), ``compiled`` (flags, dependencies, the compiled document).
"""

from relay.core.evaluate.compiled import Compiled, Drawn, compile_features
from relay.core.evaluate.context import Context
from relay.core.evaluate.outcome import Basis, Decision, Evaluation, Miss, Reason, Variant

__all__ = [
    "Basis",
    "Compiled",
    "Context",
    "Decision",
    "Drawn",
    "Evaluation",
    "Miss",
    "Reason",
    "Variant",
    "compile_features",
]
