"""OpenFeature's own SDKs with their OFREP providers, as an application uses them: Python
(PyPI ``openfeature-sdk`` + ``openfeature-provider-ofrep``) and Node (npm
``@openfeature/server-sdk`` + ``@openfeature/ofrep-provider``), against real processes on
their default worker count: a standalone, a relay in front of it, and that relay once the
standalone is gone (its copy serves).

Every evaluation's value, reason, variant and error code is what the flags' configuration
says (Unleash's MurmurHash3 bucketing in ``sdks.bucket``), through the protocol's mapping
(docs/api.md, "OpenFeature"): booleans, strings, numbers and JSON by their payload, the
code's default for a typed flag that is off, and the protocol's errors (a type the code
did not ask for, a flag the key does not see, no one to hash).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from flagkit import FEATURES, env_path, http
from ofrepkit import every_worker_answers, readme_example
from sdks import VARIANT_SEED, Evaluation, bucket, ofrep_node, ofrep_python
from service import relay_env, running

pytestmark = pytest.mark.process

ADMIN = "*:*.ofrep-sdks-admin-0123456789abcdef"
CLIENT = "default:development.ofrep-sdks-client-0123456789ab"
FRONT = "default:development.ofrep-sdks-front-0123456789abc"
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
THEMES = {"light": {"dark": False, "accent": "#fa0"}, "dark": {"dark": True, "accent": "#0af"}}


def _variant(name: str, kind: str, value: str, weight: int = 1000, **more: str) -> dict[str, Any]:
    payload = {"type": kind, "value": value}
    return {"name": name, "weight": weight, "weightType": "variable", "payload": payload} | {
        "stickiness": "default",
        **more,
    }


STRATEGIES: dict[str, dict[str, Any]] = {
    "vip": {"name": "userWithId", "parameters": {"userIds": "alice,carol"}},
    "half": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "50", "stickiness": "userId", "groupId": "half"},
    },
    "banner": {"name": "default", "variants": [_variant("hello", "string", "Hello")]},
    "limit": {"name": "default", "variants": [_variant("max", "number", "25")]},
    "ratio": {"name": "default", "variants": [_variant("quarter", "number", "0.25")]},
    "theme": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "100", "stickiness": "default", "groupId": "theme"},
        "variants": [
            _variant(name, "json", json_text, weight=500)
            for name, json_text in (  # in the order of their names, as they are kept
                ("dark", '{"dark": true, "accent": "#0af"}'),
                ("light", '{"dark": false, "accent": "#fa0"}'),
            )
        ],
    },
    "quiet-banner": {"name": "default", "variants": [_variant("hush", "string", "Shh")]},
}
OFF = {"quiet-banner"}


def build_flags(url: str) -> None:
    for name, strategy in STRATEGIES.items():
        status, answer = http(
            "POST", f"{url}{FEATURES.format(project='default')}", {"name": name}, ADMIN
        )
        assert status == 201, answer
        status, answer = http("POST", f"{url}{env_path(name)}/strategies", strategy, ADMIN)
        assert status == 200, answer
        if name not in OFF:
            assert http("POST", f"{url}{env_path(name)}/on", key=ADMIN)[0] == 200


def cases() -> list[tuple[Evaluation, dict[str, Any]]]:
    """Evaluations, each with the details the configuration says it gets."""
    found: list[tuple[Evaluation, dict[str, Any]]] = []

    def case(
        evaluation: Evaluation,
        value: Any,
        reason: str,
        variant: str | None = None,
        error: str | None = None,
    ) -> None:
        found.append(
            (evaluation, {"value": value, "reason": reason, "variant": variant, "errorCode": error})
        )

    for user in USERS:
        who = {"targetingKey": user}
        vip = user in ("alice", "carol")
        case(
            Evaluation("boolean", "vip", False, who),
            vip,
            "TARGETING_MATCH" if vip else "DEFAULT",
            "enabled" if vip else "disabled",
        )
        half = bucket("half", user) <= 50
        case(
            Evaluation("boolean", "half", False, who),
            half,
            "SPLIT" if half else "DEFAULT",
            "enabled" if half else "disabled",
        )
        theme = "dark" if bucket("theme", user, 1000, VARIANT_SEED) <= 500 else "light"
        case(Evaluation("object", "theme", {}, who), THEMES[theme], "SPLIT", theme)
    who = {"targetingKey": "zoe", "plan": "gold"}
    case(Evaluation("string", "banner", "fallback", who), "Hello", "STATIC", "hello")
    case(Evaluation("integer", "limit", 0, who), 25, "STATIC", "max")
    case(Evaluation("float", "ratio", 0.0, who), 0.25, "STATIC", "quarter")
    # a typed flag that is off: the code's default, and why
    case(Evaluation("string", "quiet-banner", "fallback", who), "fallback", "DISABLED", "disabled")
    # the protocol's errors: the code's default, and the error's code
    case(Evaluation("string", "vip", "text", who), "text", "ERROR", error="TYPE_MISMATCH")
    case(Evaluation("boolean", "nothing", True, who), True, "ERROR", error="FLAG_NOT_FOUND")
    no_one = {"plan": "gold"}
    case(
        Evaluation("object", "theme", {"n": 1}, no_one),
        {"n": 1},
        "ERROR",
        error="TARGETING_KEY_MISSING",
    )
    return found


def node_expected(wanted: dict[str, Any], evaluation: Evaluation) -> dict[str, Any]:
    """The Node provider 0.1.3 (npm's newest) predates OFREP's code default (ADR-0006): an
    answer without a value is an unexpected response to it (GENERAL, the code's default);
    its errors have no variant."""
    if evaluation.flag in OFF:
        return {**wanted, "reason": "ERROR", "variant": None, "errorCode": "GENERAL"}
    return wanted


def check_python(url: str, key: str) -> None:
    wanted = cases()
    got = ofrep_python(url, key, [e for e, _ in wanted])
    assert [(e, g) for (e, _), g in zip(wanted, got, strict=True)] == [(e, w) for e, w in wanted]


def check_node(modules: Path, url: str, key: str) -> None:
    wanted = cases()
    got = ofrep_node(modules, url, key, [e for e, _ in wanted])
    expected = [(e, node_expected(w, e)) for e, w in wanted]
    assert [(e, g) for (e, _), g in zip(wanted, got, strict=True)] == expected


def test_the_users_fall_on_both_sides() -> None:
    assert len({bucket("half", user) <= 50 for user in USERS}) == 2
    assert len({bucket("theme", user, 1000, VARIANT_SEED) <= 500 for user in USERS}) == 2


def _services(tmp_path: Path) -> tuple[dict[str, str], dict[str, str]]:
    central = {
        "RELAY_WORKERS": "auto",
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
        "RELAY_INIT_FRONTEND_API_TOKENS": FRONT,
    }
    return central, {"RELAY_WORKERS": "auto", "RELAY_CLIENT_TOKENS": CLIENT}


def _through_all(tmp_path: Path, check: Any) -> None:
    """``check(url, key)`` at a standalone, at a relay in front of it, and at that relay
    once the standalone is gone."""
    central_env, relay_extra = _services(tmp_path)
    with running(tmp_path / "central", env=central_env, name="central") as central:
        build_flags(central.url)
        check(central.url, CLIENT)
        with running(
            tmp_path / "relay", env=relay_env(central.url, CLIENT, **relay_extra), name="relay"
        ) as relay:
            check(relay.url, CLIENT)
            central.stop()
            every_worker_answers(relay, CLIENT)
            check(relay.url, CLIENT)
            assert "Traceback" not in relay.logs()


def test_python_sdk(tmp_path: Path) -> None:
    _through_all(tmp_path, check_python)


def test_node_sdk(tmp_path: Path, node_sdk: Path) -> None:
    _through_all(tmp_path, lambda url, key: check_node(node_sdk, url, key))


def test_the_readme_examples(tmp_path: Path, node_sdk: Path) -> None:
    """The README's Python and Node examples, as written but for the port, after its five
    minutes (a flag new-checkout turned on, CLIENT_KEY in the environment)."""
    central_env, _ = _services(tmp_path)
    with running(tmp_path / "central", env=central_env, name="central") as central:
        path = f"{central.url}{FEATURES.format(project='default')}"
        assert http("POST", path, {"name": "new-checkout"}, ADMIN)[0] == 201
        assert http("POST", f"{central.url}{env_path('new-checkout')}/on", key=ADMIN)[0] == 200
        env = {**os.environ, "CLIENT_KEY": CLIENT, "NODE_PATH": str(node_sdk)}
        for program, name in ((sys.executable, "openfeature-python"), ("node", "openfeature-node")):
            example = readme_example(name, central.url)
            done = subprocess.run(
                [program, "-"], input=example, env=env, capture_output=True, text=True, timeout=120
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.strip() == "new-checkout is on", (name, done.stdout)
