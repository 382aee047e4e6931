"""OFREP (the OpenFeature Remote Evaluation Protocol) over real sockets, at a standalone:
the paths, request and answer shapes, values by type, reasons and variants, errors and
their codes, ETag and 304, the key's scope and kinds.

That OFREP agrees with the Frontend API and Unleash's engine for hundreds of contexts is
tests/integration/api/test_ofrep_differential.py's; the real OpenFeature providers are
tests/e2e/test_ofrep_sdks.py's and test_ofrep_browser.py's; the stream test_ofrep_stream.py's,
the counts test_ofrep_counts.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from conftest import ADMIN_KEY, DEV_KEY, PROD_KEY, MakeClient, standalone_settings
from fake_upstream import Answer, FakeUpstream
from flagkit import create_flag, turn
from ofrepkit import (
    BULK,
    FRONT,
    OTHER_FRONT,
    USERS,
    by_key,
    colour_of,
    evaluate,
    one_path,
    standalone,
)
from sdks import VARIANT_SEED, bucket

from relay.app import build_app


@pytest.fixture
async def service(aiohttp_client: Any, tmp_path: Path) -> Any:
    return await standalone(aiohttp_client, tmp_path / "data")


async def test_bulk_lists_every_flag_with_its_value_reason_and_variant(service: Any) -> None:
    user = "bob"
    status, body, headers = await evaluate(service, context={"targetingKey": user})
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    flags = by_key(body)
    assert set(flags) == {
        "on",
        "off",
        "vip",
        "half",
        "split",
        "typed",
        "numbers",
        "broken",
        "json-nan",
    }  # fmt: skip  (not "elsewhere": another project)
    assert flags["on"] == {"reason": "STATIC", "variant": "enabled", "value": True}
    assert flags["off"] == {"reason": "DISABLED", "variant": "disabled", "value": False}
    assert flags["vip"] == {"reason": "DEFAULT", "variant": "disabled", "value": False}
    half = bucket("half", user) <= 50
    assert flags["half"] == {
        "reason": "SPLIT" if half else "DEFAULT",
        "variant": "enabled" if half else "disabled",
        "value": half,
    }
    side = "left" if bucket("split", user, 1000, VARIANT_SEED) <= 500 else "right"
    assert flags["split"] == {"reason": "SPLIT", "variant": side, "value": True}
    expected_typed = {
        "doc": {"colour": "#00f", "sizes": [1, 2]},
        "list": "a,b,c",
    }
    colour = colour_of(user)
    assert flags["typed"] == {"reason": "SPLIT", "variant": colour, "value": expected_typed[colour]}
    assert flags["numbers"] == {"reason": "STATIC", "variant": "f", "value": -2500.0}
    assert flags["broken"]["errorCode"] == "PARSE_ERROR"
    assert "forty-two" in flags["broken"]["errorDetails"]
    assert flags["json-nan"]["errorCode"] == "PARSE_ERROR"
    # a frontend key's answer names its change stream, on the origin the provider calls
    (stream,) = body["eventStreams"]
    assert stream["type"] == "sse" and set(stream) == {"type", "endpoint"}
    assert stream["endpoint"]["requestUri"].startswith("/ofrep/v1/events?key=")


async def test_values_by_type_targeting_and_the_code_default(service: Any) -> None:
    _, body, _ = await evaluate(service, context={"targetingKey": "ann", "plan": "int"})
    flags = by_key(body)
    assert flags["numbers"] == {"reason": "TARGETING_MATCH", "variant": "n", "value": 42}
    # an override is a targeting match, and the payload a string
    _, body, _ = await evaluate(service, context={"targetingKey": "ann", "plan": "gold"})
    assert by_key(body)["typed"] == {
        "reason": "TARGETING_MATCH",
        "variant": "gold",
        "value": "gilded",
    }
    _, body, _ = await evaluate(service, context={"targetingKey": "alice"})
    assert by_key(body)["vip"] == {"reason": "TARGETING_MATCH", "variant": "enabled", "value": True}
    # a typed flag turned off has no value: the provider answers the code's default
    await turn(service, "typed", on=False)
    _, body, _ = await evaluate(service, context={"targetingKey": "ann"})
    assert by_key(body)["typed"] == {"reason": "DISABLED", "variant": "disabled"}


async def test_the_targeting_key_is_the_user_id_unless_the_context_names_one(
    service: Any,
) -> None:
    for user in USERS:
        _, by_target, _ = await evaluate(service, context={"targetingKey": user})
        _, by_user, _ = await evaluate(service, context={"userId": user})
        named = {"targetingKey": "someone-else", "userId": user}
        _, both, _ = await evaluate(service, context=named)
        assert by_target == by_user == both
    assert len({colour_of(user) for user in USERS}) == 2  # the users fall on both sides


async def test_one_flag(service: Any) -> None:
    status, body, _ = await evaluate(service, one_path("typed"), {"targetingKey": "carol"})
    colour = colour_of("carol")
    assert status == 200
    assert body["key"] == "typed" and body["variant"] == colour
    # the same answer as its entry in the bulk answer
    _, bulk, _ = await evaluate(service, context={"targetingKey": "carol"})
    assert {**by_key(bulk)["typed"], "key": "typed"} == body


@pytest.mark.parametrize(
    ("path", "context", "status", "code"),
    [
        (one_path("nothing"), {"targetingKey": "u"}, 404, "FLAG_NOT_FOUND"),
        (one_path("elsewhere"), {"targetingKey": "u"}, 404, "FLAG_NOT_FOUND"),  # not its project
        (one_path("split"), {}, 400, "TARGETING_KEY_MISSING"),
        (one_path("broken"), {"targetingKey": "u"}, 400, "PARSE_ERROR"),
        (one_path("on"), {"nested": {"a": 1}}, 400, "INVALID_CONTEXT"),
        (BULK, {"list": [1]}, 400, "INVALID_CONTEXT"),
        (BULK, {"appName": "a" * 256}, 400, "INVALID_CONTEXT"),
        (BULK, "a string", 400, "INVALID_CONTEXT"),
    ],
)
async def test_errors_carry_openfeature_s_codes_in_unleash_s_shape(
    service: Any, path: str, context: Any, status: int, code: str
) -> None:
    got, body, _ = await evaluate(service, path, context)
    assert got == status, body
    assert body["errorCode"] == code and body["errorDetails"] == body["message"]
    assert {"id", "name", "message", "details"} <= set(body)
    if path != BULK:
        assert body["key"] == path.rsplit("/", 1)[1]


@pytest.mark.parametrize("raw_body", [b"{", b"[1, 2]", b"", b'"context"'])
async def test_a_body_that_is_no_request_is_a_parse_error(service: Any, raw_body: bytes) -> None:
    for path in (BULK, one_path("on")):
        status, body, _ = await evaluate(service, path, body=raw_body)
        assert status == 400 and body["errorCode"] == "PARSE_ERROR", body


async def test_no_context_at_all_is_an_empty_one(service: Any) -> None:
    """What the Python provider sends when the application gives no context."""
    status, body, _ = await evaluate(service, one_path("on"), body={})
    assert (status, body) == (
        200,
        {"key": "on", "reason": "STATIC", "variant": "enabled", "value": True},
    )


async def test_a_rollout_without_anyone_to_hash_is_targeting_key_missing(service: Any) -> None:
    """No targetingKey, userId nor sessionId: the flags that hash one say so, flag by flag
    (no session is made up, whose coin toss would change at each request)."""
    _, body, _ = await evaluate(service, context={"plan": "silver"})
    flags = by_key(body)
    for name in ("split", "typed"):
        assert flags[name]["errorCode"] == "TARGETING_KEY_MISSING", name
    _, body, _ = await evaluate(service, context={"plan": "gold"})
    assert by_key(body)["typed"]["value"] == "gilded"  # an override: nothing drawn
    assert flags["half"] == {"reason": "DEFAULT", "variant": "disabled", "value": False}  # userId
    assert flags["on"]["value"] is True
    _, body, _ = await evaluate(service, context={"sessionId": "s-1"})
    assert "errorCode" not in by_key(body)["split"]  # a session is something to hash


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": FRONT},
        {"Authorization": f"Bearer {FRONT}"},
        {"X-API-Key": FRONT},
        {"Authorization": DEV_KEY},
        {"X-API-Key": DEV_KEY},
    ],
)
async def test_frontend_and_client_keys_in_any_of_the_three_headers(
    service: Any, headers: dict[str, str]
) -> None:
    status, body, _ = await evaluate(service, key=None, headers=headers)
    assert status == 200 and "on" in by_key(body)
    assert ("eventStreams" in body) is (FRONT in str(headers))  # a client key is a secret


@pytest.mark.parametrize(("key", "status"), [(None, 401), ("nonsense", 401), (ADMIN_KEY, 403)])
async def test_no_key_or_another_kind_of_key(service: Any, key: str | None, status: int) -> None:
    for path in (BULK, one_path("on")):
        got, body, _ = await evaluate(service, path, key=key)
        assert got == status, body
        assert {"id", "name", "message", "details"} <= set(body)


async def test_a_key_sees_its_environment_and_projects(service: Any) -> None:
    _, body, _ = await evaluate(service, key=PROD_KEY, context={"targetingKey": "u"})
    assert by_key(body)["on"]["value"] is False  # turned on in development only
    _, body, _ = await evaluate(service, key=OTHER_FRONT, context={"targetingKey": "u"})
    assert list(by_key(body)) == ["elsewhere"]


async def test_a_throttled_caller_is_told_when_to_come_back(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    settings = standalone_settings(tmp_path, auth_failure_limit=1, auth_failure_window=3600)
    client = await aiohttp_client(build_app(settings))
    assert (await evaluate(client, key="default:development.wrong-one-0123456789"))[0] == 401
    status, _, headers = await evaluate(client, key="default:development.wrong-two-0123456789")
    assert status == 429 and int(headers["Retry-After"]) >= 1


async def test_bulk_etag_and_304(service: Any) -> None:
    context = {"targetingKey": "dave"}
    _, first, headers = await evaluate(service, context=context)
    etag = headers["ETag"]
    assert headers["Cache-Control"] == "no-cache"
    status, body, again = await evaluate(service, context=context, headers={"If-None-Match": etag})
    assert (status, body, again["ETag"]) == (304, None, etag)
    # the same answers for another user: the same ETag; a change: another
    twins = []
    for user in USERS[1:]:
        _, body, headers = await evaluate(service, context={"targetingKey": user})
        if body == first:
            twins.append(headers["ETag"])
    assert twins and set(twins) == {etag}
    await turn(service, "off")
    status, body, headers = await evaluate(
        service, context=context, headers={"If-None-Match": etag}
    )
    assert status == 200 and headers["ETag"] != etag
    assert by_key(body)["off"]["value"] is True


async def test_disable_all_endpoint_leaves_a_frontend_key_the_enabled_flags(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """As /api/frontend: no disabled flag's name to a public key (a client key sees all)."""
    settings = standalone_settings(
        tmp_path, init_frontend_api_tokens=[FRONT], disable_all_endpoint=True
    )
    client = await aiohttp_client(build_app(settings))
    await create_flag(client, "shown")
    await turn(client, "shown")
    await create_flag(client, "secret-plan")
    _, body, _ = await evaluate(client, context={"targetingKey": "u"})
    assert list(by_key(body)) == ["shown"]
    _, body, _ = await evaluate(client, key=DEV_KEY, context={"targetingKey": "u"})
    assert sorted(by_key(body)) == ["secret-plan", "shown"]


async def test_a_relay_that_cannot_answer_says_general(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """No copy of the key's flags yet, and the upstream down: 503 with OpenFeature's GENERAL
    (the provider then answers the code's default), not a bare error."""
    upstream.features_answer = Answer(503)
    relay = await make_relay(client_tokens=[])
    for path in (BULK, one_path("on")):
        status, body, _ = await evaluate(relay, path, {"targetingKey": "u"}, DEV_KEY)
        assert status == 503, body
        assert body["errorCode"] == "GENERAL" and body["errorDetails"] == body["message"]
