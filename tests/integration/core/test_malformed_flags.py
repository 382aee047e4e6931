"""A malformed flag costs only itself (issue 33): shapes a document's check let through and
the evaluator crashed on (``"variants": ["blue"]``, ``"parameters": [...]``, a constraint's
``"values": 5``, a variant weight as text, dependencies as strings) made every Frontend API
answer a 500 with a traceback. From an offline bootstrap file, an Edge backup or an
upstream, such a flag is now left out of every answer (client features, delta, stream,
Frontend API) or its last good copy kept, counted and logged once per copy read.

Real apps on real sockets (aiohttp's test server), a fake upstream, SQLite files."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, MakeClient, auth
from fake_upstream import FakeUpstream
from frontkit import FRONT_KEY
from hypothesis import given, settings
from hypothesis import strategies as st
from streamkit import Events

from relay.app import build_app
from relay.core.evaluate import Context, compile_features
from relay.core.flag_shapes import MALFORMED
from relay.settings import load_settings


def flag(name: str, **fields: Any) -> dict[str, Any]:
    strategy = {"name": "default", "parameters": {}, "constraints": []}
    return {"name": name, "enabled": True, "project": "default", "strategies": [strategy]} | fields


def strategy(**fields: Any) -> dict[str, Any]:
    return {"name": "default", "parameters": {}, "constraints": []} | fields


MALFORMED_FLAGS = [
    flag("variants-of-text", variants=["blue"]),
    flag("parameters-list", strategies=[strategy(name="flexibleRollout", parameters=["50"])]),
    flag(
        "values-five",
        strategies=[
            strategy(constraints=[{"contextName": "userId", "operator": "IN", "values": 5}])
        ],
    ),
    flag("weight-text", variants=[{"name": "a", "weight": "heavy", "weightType": "fix"}]),
    flag("dependencies-text", dependencies=["good"]),
]
GOOD = flag("good")
DOCUMENT = {"version": 2, "features": [GOOD, *MALFORMED_FLAGS, flag("also-good")]}
SERVED = ["also-good", "good"]


def left_out() -> float:
    return sum(MALFORMED.labels(outcome)._value.get() for outcome in ("left_out", "kept_last_good"))


async def every_endpoint(client: Any) -> None:
    """Each endpoint that serves or evaluates flags answers, without the malformed ones."""
    headers = {**auth(DEV_KEY), "Unleash-Client-Spec": "5.2.0"}
    features = await client.get("/api/client/features", headers=headers)
    assert features.status == 200, await features.text()
    assert sorted(f["name"] for f in (await features.json())["features"]) == SERVED
    one = await client.get("/api/client/features/values-five", headers=headers)
    assert one.status == 404
    delta = await client.get("/api/client/delta", headers=headers)
    [hydration] = (await delta.json())["events"]
    assert sorted(f["name"] for f in hydration["features"]) == SERVED
    stream = Events(await client.get("/api/client/streaming", headers=headers))
    connected = await stream.next()
    assert sorted(f["name"] for f in connected["data"]["events"][0]["features"]) == SERVED
    stream.response.close()
    front = auth(FRONT_KEY)
    for path in ("/api/frontend", "/api/frontend/all", "/api/proxy", "/api/proxy/all"):
        for method in ("GET", "POST"):
            body = {"context": {"userId": "7"}} if method == "POST" else None
            response = await client.request(method, path, json=body, headers=front)
            assert response.status == 200, (path, method, await response.text())
            toggles = (await response.json())["toggles"]
            assert sorted(t["name"] for t in toggles) == SERVED, path
    good = await client.get("/api/frontend/features/good", headers=front)
    assert good.status == 200
    for bad in MALFORMED_FLAGS:
        response = await client.get(f"/api/frontend/features/{bad['name']}", headers=front)
        assert response.status == 404, await response.text()


def offline(tmp_path: Path, file: Path) -> Any:
    return load_settings(
        {
            "mode": "offline",
            "workers": 1,
            "data_dir": tmp_path / "data",
            "bootstrap_file": file,
            "reload_interval": 0.05,
            "client_tokens": [DEV_KEY],
            "frontend_tokens": [FRONT_KEY],
        }
    )


async def test_offline_every_endpoint_leaves_the_malformed_flags_out(
    aiohttp_client: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / "flags.json"
    file.write_text(json.dumps(DOCUMENT))
    before = left_out()
    with caplog.at_level(logging.WARNING):
        client = await aiohttp_client(build_app(offline(tmp_path, file)))
        for _ in range(3):
            await every_endpoint(client)
    assert left_out() - before == len(MALFORMED_FLAGS)  # the file read once
    told = [r for r in caplog.records if "cannot be read" in r.getMessage()]
    assert len(told) == 1  # once for the file, not per request
    assert not [r for r in caplog.records if r.exc_info]  # no traceback


async def test_offline_reload_keeps_the_last_good_copy_of_a_flag_it_cannot_read(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """A typo in one flag replaced the whole good copy (or, through the check, crashed the
    Frontend API); now that flag keeps its last good copy while the others' changes are
    taken."""
    file = tmp_path / "flags.json"
    file.write_text(json.dumps({"version": 2, "features": [GOOD, flag("other")]}))
    client = await aiohttp_client(build_app(offline(tmp_path, file)))
    typo = flag("good", variants=["blue"])  # was valid; now of no readable shape
    file.write_text(json.dumps({"version": 2, "features": [typo, flag("other", enabled=False)]}))

    async def toggles() -> dict[str, bool]:
        response = await client.get("/api/frontend/all", headers=auth(FRONT_KEY))
        assert response.status == 200, await response.text()
        return {t["name"]: t["enabled"] for t in (await response.json())["toggles"]}

    from service import eventually

    async def reloaded() -> bool:
        return (await toggles()).get("other") is False

    await eventually(reloaded, "the changed file taken")
    assert await toggles() == {"good": True, "other": False}


async def test_a_relay_whose_upstream_serves_a_malformed_flag_answers(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features = DOCUMENT
    relay = await make_relay(frontend_tokens=[FRONT_KEY])
    await every_endpoint(relay)


async def test_an_edge_backup_with_a_malformed_flag_serves_the_others(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    from conftest import relay_settings
    from service import free_port

    folder = tmp_path / "backup"
    folder.mkdir()
    token = {
        "token": DEV_KEY,
        "type": "client",
        "environment": "development",
        "projects": ["default"],
        "status": "Validated",
    }
    (folder / "unleash_tokens.json").write_text(json.dumps([token]))
    (folder / "unleash_features.json").write_text(json.dumps([["development", DOCUMENT]]))
    unreachable = f"http://127.0.0.1:{free_port()}"
    settings = relay_settings(
        tmp_path / "relay", unreachable, backup_folder=folder, frontend_tokens=[FRONT_KEY]
    )
    client = await aiohttp_client(build_app(settings))
    await every_endpoint(client)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
FIELDS = ("name", "weight", "values", "parameters", "variants", "overrides", "dependencies")


def anything_in(template: Any) -> Any:
    """``template`` with any of its values replaced by any JSON."""
    if isinstance(template, dict):
        return st.fixed_dictionaries(
            {k: st.one_of(anything_in(v), JSON) for k, v in template.items()}
        )
    if isinstance(template, list):
        return st.lists(st.one_of(*(anything_in(v) for v in template), JSON), max_size=3)
    return st.one_of(st.just(template), JSON)


TEMPLATE = {
    "name": "f",
    "enabled": True,
    "project": "default",
    "strategies": [
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "50", "stickiness": "default", "groupId": "g"},
            "constraints": [
                {"contextName": "userId", "operator": "IN", "values": ["1"], "inverted": False},
                {"contextName": "v", "operator": "REGEX", "value": "a+", "caseInsensitive": True},
            ],
            "segments": [1],
            "variants": [{"name": "s", "weight": 1000, "stickiness": "default"}],
        }
    ],
    "variants": [
        {
            "name": "blue",
            "weight": 500,
            "stickiness": "userId",
            "payload": {"type": "string", "value": "x"},
            "overrides": [{"contextName": "userId", "values": ["1"]}],
        }
    ],
    "dependencies": [{"feature": "p", "enabled": True, "variants": ["blue"]}],
}
SEGMENT = {"id": 1, "constraints": [{"contextName": "userId", "operator": "IN", "values": ["1"]}]}


@settings(max_examples=400, deadline=None)
@given(anything_in(TEMPLATE), anything_in(SEGMENT))
def test_no_shape_of_a_flag_breaks_the_evaluator(feature: Any, segment: Any) -> None:
    """Any value of any field: the flag is evaluated or left out, never an exception."""
    parent = {"name": "p", "enabled": True, "strategies": []}
    document = {"features": [feature, parent], "segments": [segment]}
    compiled = compile_features(document, hostname="here")
    for user in (None, "1", "2"):
        context = Context(current_time=datetime.now(UTC), user_id=user, properties={"v": "aa"})
        found = compiled.evaluate(context)
        assert [e.name for e in found][-1] == "p"
        for evaluation in found:
            compiled.evaluate_one(evaluation.name, context, explain=True)
