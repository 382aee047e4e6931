"""What OFREP costs, and what a caller with any key (a frontend key is public) cannot get
from it: memory beyond the Frontend API's bounds, a count in another environment, another
scope's flags, a 5xx."""

from __future__ import annotations

import gc
import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, PROD_KEY
from ofrepkit import BULK, FRONT, by_key, evaluate, one_path, standalone

from relay.core import ofrep
from relay.core.catalog import Rendered
from relay.core.evaluate import Decision, Evaluation, Reason, Variant
from relay.core.frontend import Frontends


def _rendered(revision: int, flags: int = 20) -> Rendered:
    features = [
        {"name": f"f{n}", "enabled": True, "strategies": [{"name": "default"}]}
        for n in range(flags)
    ]
    body = json.dumps({"version": 2, "features": features, "segments": []}).encode()
    return Rendered(body, f'"r{revision}"', revision)


def test_answers_rendered_live_no_longer_than_the_compiled_scopes_they_came_from() -> None:
    """OFREP renders its answers from the Frontend API's compiled scopes (bounded in bytes):
    when those let a scope go (a change, too many scopes), its OFREP answers go with it,
    whatever their count."""
    frontends = Frontends(most_compiled=2)
    answers = ofrep.Ofreps()
    context = ofrep.context(ofrep.OfrepContext(targetingKey="u"), None, datetime.now(UTC))
    for revision in range(50):
        rendered = _rendered(revision)
        scoped = frontends.scoped(rendered)
        answers.of(scoped).bulk(scoped, context, True)
    gc.collect()
    assert len(answers) <= 2


def _evaluations(flags: int, enabled: bool = True) -> list[ofrep.Outcome]:
    """Answers of ``flags`` flags, as a request answered them."""
    reason = Reason(Decision.MATCHED, 1, "default")
    variant = Variant("disabled", False, None, enabled)
    return [
        ofrep.Outcome(
            b"{}", b"", None, Evaluation(f"f{n}", "default", enabled, variant, False, reason)
        )
        for n in range(flags)
    ]


def test_one_key_s_made_up_applications_cost_no_other_key_its_counts() -> None:
    """The application counted is the caller's to name: a key naming thousands fills only
    its own share of the tally (the rest of its evaluations not counted, and counted as
    such); another key's evaluations, of this environment or another, are all counted."""
    tally = ofrep.Tally(most=5)
    for n in range(50):
        tally.add("flooder", f"app-{n}", "development", 0, _evaluations(10))
    tally.add("shop", "shop", "development", 0, _evaluations(10))
    tally.add("other", "shop", "production", 0, _evaluations(10, enabled=False))
    tally.add("other", "shop", "production", 0, _evaluations(10, enabled=False))
    assert tally.overflowing
    counts = tally.take()
    assert sum(1 for key in counts if key.app_name.startswith("app-")) == 5 * 10
    shop = {
        (k.environment, k.feature_name): (c.yes, c.no)
        for k, c in counts.items()
        if k.app_name == "shop"
    }
    assert shop == {
        **{("development", f"f{n}"): (1, 0) for n in range(10)},
        **{("production", f"f{n}"): (0, 2) for n in range(10)},
    }
    assert not tally.overflowing and tally.take() == {}


def test_counts_whose_write_failed_are_counted_with_the_next() -> None:
    tally = ofrep.Tally()
    tally.add("shop", "shop", "development", 0, _evaluations(3))
    failed = tally.take()
    tally.add("shop", "shop", "development", 0, _evaluations(3))
    tally.put_back(failed)
    assert {k.feature_name: c.yes for k, c in tally.take().items()} == {"f0": 2, "f1": 2, "f2": 2}


@pytest.fixture
async def service(aiohttp_client: Any, tmp_path: Path) -> Any:
    return await standalone(aiohttp_client, tmp_path / "data")


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"context": {"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}", "PARSE_ERROR"),
        (b'{"context": {"x": ' + b"9" * 5000 + b"}}", "PARSE_ERROR"),  # out of range
        (b'{"context": {"x": "\\u0000"}}', "INVALID_CONTEXT"),
        (b'{"context": {"targetingKey": {"id": 1}}}', "INVALID_CONTEXT"),
        (b'{"context": {"p": "' + b"x" * 5000 + b'"}}', "INVALID_CONTEXT"),
        (json.dumps({"context": {f"p{n}": n for n in range(101)}}).encode(), "INVALID_CONTEXT"),
        (b"\xff\xfe{}", "PARSE_ERROR"),
        (b"null", "PARSE_ERROR"),
    ],
)
async def test_a_body_no_one_should_send_is_a_400_with_its_code(
    service: Any, body: bytes, code: str
) -> None:
    for path in (BULK, one_path("on")):
        status, answer, _ = await evaluate(service, path, body=body)
        assert status == 400 and answer["errorCode"] == code, answer


async def test_a_refetch_naming_a_revision_never_reached_waits_three_seconds_at_most(
    service: Any,
) -> None:
    """Its caller's own time, nobody else's: the answer then is the flags held."""
    started = time.monotonic()
    path = f"{BULK}?flagConfigEtag=999999999"
    status, body, _ = await evaluate(service, path, {"targetingKey": "u"})
    assert status == 200 and by_key(body)["on"]["value"] is True
    assert 2.5 <= time.monotonic() - started < 10


async def test_a_key_sees_no_other_scope_s_flags_in_any_answer(service: Any) -> None:
    """Another project's flag is unknown to the key in every way it could ask (one flag, all
    of them, with a client key of another environment), and so are its changes."""
    for key in (FRONT, DEV_KEY, PROD_KEY):
        status, body, _ = await evaluate(service, one_path("elsewhere"), {"targetingKey": "u"}, key)
        assert (status, body["errorCode"]) == (404, "FLAG_NOT_FOUND")
        _, body, _ = await evaluate(service, BULK, {"targetingKey": "u"}, key)
        assert "elsewhere" not in by_key(body)
