"""Real SDKs evaluate flags configured through the admin API: Python's UnleashClient and
Node's unleash-client, pointed at standalone and at a relay in front of it, with the
standalone on SQLite and on PostgreSQL. Real processes on loopback.

Expected answers come from what was configured, not from our code: on/off, a 30 % rollout
over 2,000 user ids (the share within a tolerance, and exactly the users Unleash's
MurmurHash3 bucketing puts in it), constraints of each operator family (inverted,
case-insensitive), strategy variants with payloads (each user's variant as the bucketing
picks it), a segment, and several strategies on one flag (a disabled one not served).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pg
import pytest
from conftest import ADMIN_KEY, DEV_KEY
from flagstate import EXPECTED, PAYLOADS, ROLLOUT, build_state
from sdks import VARIANT_SEED, Check, bucket, node_evaluate, python_evaluate, quiet_sdk_logs
from service import Service, relay_env, running

USERS = [str(i) for i in range(2000)]
TOLERANCE = 5  # percentage points: 6 standard deviations of 2,000 draws at 30 %


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def deployment(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Service]]:
    """A standalone with the flags, and a relay in front of it."""
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN_KEY, "RELAY_INIT_CLIENT_API_TOKENS": DEV_KEY}
    database = None
    if request.param == "postgres":
        request.getfixturevalue("postgres_server")
        database = asyncio.run(pg.create_database())
        env["RELAY_DATABASE_URL"] = pg.url_of(database)
    workdir = tmp_path_factory.mktemp(f"flags-{request.param}")
    try:
        with running(workdir / "standalone", env=env, name="standalone") as standalone:
            build_state(standalone.url)
            with running(workdir / "relay", env=relay_env(standalone.url, DEV_KEY)) as relay:
                yield {"standalone": standalone, "relay": relay}
    finally:
        if database is not None:
            asyncio.run(pg.drop_database(database))


def evaluate(
    sdk: str, url: str, checks: list[Check], request: pytest.FixtureRequest, tmp: Path
) -> list[Any]:
    if sdk == "node":
        return node_evaluate(request.getfixturevalue("node_sdk"), url, DEV_KEY, checks)
    quiet_sdk_logs()
    return python_evaluate(url, DEV_KEY, checks, tmp)


@pytest.mark.parametrize("target", ["standalone", "relay"])
@pytest.mark.parametrize("sdk", ["python", "node"])
def test_sdk_evaluates_flags_as_configured(
    sdk: str,
    target: str,
    deployment: dict[str, Service],
    request: pytest.FixtureRequest,
    tmp_path: Path,
) -> None:
    fixed = [Check(flag, context) for flag, context, _ in EXPECTED]
    rollout = [Check("rollout", {"userId": user}) for user in USERS]
    variants = [Check("variants", {"userId": user}, variant=True) for user in USERS[:400]]
    disabled = [Check("off", {"userId": "1"}, variant=True)]
    answers = evaluate(
        sdk, deployment[target].url, fixed + rollout + variants + disabled, request, tmp_path
    )
    got_fixed, answers = answers[: len(fixed)], answers[len(fixed) :]
    got_rollout, answers = answers[: len(rollout)], answers[len(rollout) :]
    got_variants, [got_disabled] = answers[: len(variants)], answers[len(variants) :]

    wrong = [
        (flag, ctx, want)
        for (flag, ctx, want), got in zip(EXPECTED, got_fixed, strict=True)
        if got is not want
    ]
    assert wrong == [], wrong

    percent = 100 * sum(got_rollout) / len(USERS)
    assert abs(percent - ROLLOUT) <= TOLERANCE, percent
    assert got_rollout == [bucket("rollout", user) <= ROLLOUT for user in USERS]

    names = [v["name"] for v in got_variants]
    assert names == [
        "blue" if bucket("variants", user, 1000, VARIANT_SEED) <= 500 else "green"
        for user in USERS[:400]
    ]
    assert abs(names.count("blue") / len(names) - 0.5) <= 0.1, names.count("blue")
    for variant in got_variants:
        assert variant["enabled"] is True and variant["feature_enabled"] is True
        assert variant["payload"] == PAYLOADS[variant["name"]]
    assert (got_disabled["name"], got_disabled["enabled"]) == ("disabled", False)
