"""The flags the real SDKs' tests configure through a standalone's admin API
(``build_state``), with their strategies, and what the SDKs must answer for them."""

from __future__ import annotations

from typing import Any

from flagkit import FEATURES, env_path, even_variants, http

ROLLOUT = 30


def default_with(*constraints: dict[str, Any]) -> dict[str, Any]:
    return {"name": "default", "constraints": list(constraints)}


PAYLOADS = {
    "blue": {"type": "json", "value": '{"color": "#00f"}'},
    "green": {"type": "string", "value": "go"},
}


STRATEGIES: dict[str, list[dict[str, Any]]] = {
    "off": [],
    "on": [],
    "rollout": [
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": str(ROLLOUT), "stickiness": "userId", "groupId": "rollout"},
        }
    ],
    "email-admins": [
        default_with(
            {
                "contextName": "email",
                "operator": "STR_STARTS_WITH",
                "values": ["ADMIN@"],
                "caseInsensitive": True,
            }
        )
    ],
    "not-user-1": [
        default_with({"contextName": "userId", "operator": "IN", "values": ["1"], "inverted": True})
    ],
    "adults": [default_with({"contextName": "age", "operator": "NUM_GTE", "value": "18"})],
    "after-2020": [
        default_with(
            {
                "contextName": "currentTime",
                "operator": "DATE_AFTER",
                "value": "2020-01-01T00:00:00.000Z",
            }
        )
    ],
    "new-app": [
        default_with({"contextName": "appVersion", "operator": "SEMVER_GTE", "value": "1.10.0"})
    ],
    "variants": [
        {
            "name": "flexibleRollout",
            "parameters": {"rollout": "100", "stickiness": "userId"},
            "variants": even_variants(PAYLOADS),
        }
    ],
    "several": [
        default_with({"contextName": "userId", "operator": "IN", "values": ["1"]}),
        {"name": "flexibleRollout", "parameters": {"rollout": "0"}},
        {"name": "default", "disabled": True},
    ],
}


def props(**values: str) -> dict[str, Any]:
    return {"properties": values}


# (flag, context, expected isEnabled)
EXPECTED: list[tuple[str, dict[str, Any], bool]] = [
    ("off", {"userId": "1"}, False),
    ("on", {"userId": "1"}, True),
    ("on", {}, True),
    ("email-admins", props(email="admin@shop.io"), True),
    ("email-admins", props(email="user@shop.io"), False),
    ("not-user-1", {"userId": "1"}, False),
    ("not-user-1", {"userId": "2"}, True),
    ("adults", props(age="18"), True),
    ("adults", props(age="17.5"), False),
    ("after-2020", {"currentTime": "2021-06-01T00:00:00.000Z"}, True),
    ("after-2020", {"currentTime": "2019-06-01T00:00:00.000Z"}, False),
    ("new-app", props(appVersion="1.10.0"), True),
    ("new-app", props(appVersion="1.9.9"), False),
    ("new-app", props(appVersion="1.10.0-rc.1"), False),
    ("segment", {"userId": "7"}, True),
    ("segment", {"userId": "9"}, False),
    ("several", {"userId": "1"}, True),
    ("several", {"userId": "2"}, False),
    ("nothing-like-this", {"userId": "1"}, False),
]


def build_state(url: str) -> None:
    """The flags above, through the admin API of a running standalone."""
    status, segment = http(
        "POST",
        f"{url}/api/admin/segments",
        {
            "name": "testers",
            "constraints": [{"contextName": "userId", "operator": "IN", "values": ["7", "8"]}],
        },
    )
    assert status == 201, segment
    flags = {**STRATEGIES, "segment": [{"name": "default", "segments": [segment["id"]]}]}
    for name, strategies in flags.items():
        assert http("POST", f"{url}{FEATURES.format(project='default')}", {"name": name})[0] == 201
        for strategy in strategies:
            status, answer = http("POST", f"{url}{env_path(name)}/strategies", strategy)
            assert status == 200, answer
        if name != "off":
            assert http("POST", f"{url}{env_path(name)}/on")[0] == 200
