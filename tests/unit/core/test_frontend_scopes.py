"""Compiled scopes of the Frontend API (issue 33, row 2): two frontend keys whose scopes'
flags were each over 8 MB thrashed the compiled scopes (counted at 8 times the answer's
bytes against 128 MiB), so each request recompiled: 95 answers in 6 s instead of 8,886,
and every other caller waited. A compiled scope now counts what it measures; the scopes in
use stay compiled; one that does not fit beside them is refused for itself only."""

from __future__ import annotations

import gc
import json
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import pytest
from conftest import REPO

from relay.core.catalog import Rendered
from relay.core.errors import Unavailable
from relay.core.evaluate import Context, compile_features
from relay.core.evaluate.constraints import reserved
from relay.core.frontend import COMPILES, IN_USE, Frontends
from relay.core.memory import measured


def big(project: str, flags: int = 100, values: int = 1000) -> Rendered:
    """A scope's flags of about 84 kB each (a constraint of 1,000 values of 80 bytes)."""
    features = [
        {
            "name": f"{project}-{i}",
            "enabled": True,
            "project": project,
            "strategies": [
                {
                    "name": "default",
                    "constraints": [
                        {
                            "contextName": "userId",
                            "operator": "IN",
                            "values": [f"{i}-{k}-".ljust(80, "x") for k in range(values)],
                        }
                    ],
                }
            ],
        }
        for i in range(flags)
    ]
    document = {"version": 2, "features": features, "query": {"project": [project]}}
    body = json.dumps(document).encode()
    return Rendered(body, f'"{project}-{len(body)}"', 1)


def context() -> Context:
    return Context(current_time=datetime.now(UTC), user_id="0-1-".ljust(80, "x"))


def compiles() -> float:
    return COMPILES._value.get()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_two_large_scopes_alternating_are_compiled_once_each() -> None:
    one, other = big("one"), big("other")
    assert len(one.body) > 8_000_000  # 8x would count 128 MiB for the two
    frontends = Frontends()
    before = compiles()
    for _ in range(5):
        for rendered in (one, other):
            assert frontends.answer(rendered, context(), True).body
    assert compiles() - before == 2
    assert frontends.held < 2 * 3 * len(one.body)  # what they measure: ~2x their bytes


def test_a_scope_that_does_not_fit_beside_those_in_use_is_refused_for_itself() -> None:
    clock = Clock()
    one, other = big("one", flags=10), big("other", flags=10)
    frontends = Frontends(compiled_bytes=int(measured_size(one) * 1.5), clock=clock)
    before = compiles()
    frontends.answer(one, context(), True)
    assert frontends.answer(other, context(), True).body  # compiled, answered once, not kept
    with pytest.raises(Unavailable):
        frontends.scoped(other)
    for _ in range(3):  # the scope in use is served, never recompiled
        clock.now += 1
        frontends.answer(one, Context(current_time=datetime.now(UTC), user_id="u"), True)
    assert compiles() - before == 2
    clock.now += IN_USE + 1  # "one" no longer in use: room for "other"
    frontends.scoped(other)
    frontends.scoped(other)
    assert compiles() - before == 3


def test_a_new_revision_of_a_scope_replaces_its_last() -> None:
    """The revision a scope leaves is no longer asked for: it never holds room."""
    clock = Clock()
    old = big("one", flags=10)
    new = Rendered(old.body.replace(b'"one-0"', b'"one-x"'), '"one-new"', 2)
    frontends = Frontends(compiled_bytes=int(measured_size(old) * 1.5), clock=clock)
    frontends.scoped(old)
    clock.now += 1
    frontends.scoped(new)
    frontends.scoped(new)  # held: not refused, not compiled again
    assert frontends.scoped(new).compiled.flags[0].name == "one-x"


def measured_size(rendered: Rendered) -> int:
    return measured(compile_features(json.loads(rendered.body)), reserved())


@pytest.mark.parametrize("flags", [10, 200])
def test_a_compiled_scope_measures_what_tracemalloc_sees(flags: int) -> None:
    import sys

    sys.path.insert(0, str(REPO / "bench"))
    from evaluate import document

    body = json.dumps(document(flags)).encode()
    gc.collect()
    tracemalloc.start()
    try:
        compiled = compile_features(json.loads(body))
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    found: Any = measured(compiled)
    assert 0.9 * traced <= found <= 1.1 * traced
