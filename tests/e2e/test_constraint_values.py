"""A constraint's value is taken only when the SDKs read it as we do: checked against the
functions the Node SDK evaluates it with (``Number``, ``new Date``, its ``semver``)."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from conftest import standalone_settings
from flagkit import call, create_flag, env_path, ok
from yggdrasil_engine.engine import UnleashEngine

from relay.app import build_app
from relay.central.database import central_database

ARABIC_FIVE = "\u0665"  # Python's float reads it as 5
NUMBERS = [
    *("1_000", ARABIC_FIVE, "0x10", "0b1", "Infinity", "-Infinity", "NaN", "1e999", ".5", "5."),
    *("", " 1", "1 ", "1,5", "+5", "-0", "3.5", "1e3", "007", "-1.25E-3", "1e-400"),
]
DATES = [
    *("2024-W01-1", "2024-001", "2024-01-01", "2024-01-01T00:00:00", "2024-01-01 00:00:00Z"),
    *("2024-01-01t00:00:00z", "20240101T000000Z", "2024-02-30T00:00:00Z", "2024-01-01T24:00:00Z"),
    *("2024-01-01T00:00:60Z", "+002024-01-01T00:00:00Z", "yesterday", "2024-01-01T00:00:00+0530"),
    *("2024-01-01T00:00:00Z", "2024-01-01T00:00:00.123+05:30", "2024-01-01T00:00:00.123456789Z"),
    *("0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z", "2020-06-30T12:00:00-07:00"),
]
VERSIONS = [
    *("1.2.3", "v1.2.3", "=1.2.3", "1.2", "01.2.3", "1.2.3-beta.1+build.5", "1.2.3-0.a"),
    *("9007199254740991.0.0", "9007199254740992.0.0", "1.2.3-" + "a" * 300, " 1.2.3"),
    *(f"1{ARABIC_FIVE}.2.3", f"1.2.3-1{ARABIC_FIVE}", "1.2.3\n"),
]

# What the Node SDK makes of each value (lib/strategy/strategy.js): a number, a time in
# milliseconds, a valid version; null where it cannot evaluate the constraint.
SDK_READS = """
const path = require('path');
const [modules, input] = [process.argv[1], JSON.parse(require('fs').readFileSync(0, 'utf8'))];
const semver = require(require.resolve('semver', {paths: [path.join(modules, 'unleash-client')]}));
const read = ([op, v]) => {
  if (op === 'NUM_EQ') { const n = Number(v); return Number.isFinite(n) ? n : null; }
  if (op === 'DATE_AFTER') { const t = new Date(v).getTime(); return Number.isNaN(t) ? null : t; }
  return semver.valid(v) && !v.startsWith('v') ? v : null;
};
process.stdout.write(JSON.stringify(input.map(read)));
"""


def sdk_reads(modules: Path, values: list[tuple[str, str]]) -> list[Any]:
    done = subprocess.run(
        ["node", "-e", SDK_READS, str(modules)],
        input=json.dumps(values),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    reads: list[Any] = json.loads(done.stdout)
    return reads


def ours(operator: str, value: str) -> Any:
    """What we make of a value we accept, to compare with the SDK's reading."""
    if operator == "NUM_EQ":
        return float(value)
    if operator == "DATE_AFTER":
        moment = datetime.fromisoformat(value) - datetime(1970, 1, 1, tzinfo=UTC)
        return moment.days * 86_400_000 + moment.seconds * 1000 + moment.microseconds // 1000
    return value


async def accepted_values(client: Any) -> list[tuple[str, str]]:
    """The candidates a strategy takes; each refused one is a 400 naming its value."""
    await create_flag(client, "checkout")
    candidates = [
        *(("NUM_EQ", v) for v in NUMBERS),
        *(("DATE_AFTER", v) for v in DATES),
        *(("SEMVER_EQ", v) for v in VERSIONS),
    ]
    accepted = []
    for operator, value in candidates:
        good = {"contextName": "x", "operator": "IN", "values": ["a"]}
        constraint = {"contextName": "x", "operator": operator, "value": value}
        body = {"name": "default", "constraints": [good, constraint]}
        status, answer = await call(client, "POST", f"{env_path('checkout')}/strategies", body)
        if status == 200:
            accepted.append((operator, value))
            continue
        assert status == 400, (value, answer)
        assert [d["path"] for d in answer["details"]] == ["/body/constraints/1/value"], answer
    return accepted


async def test_only_values_the_sdk_reads_as_we_do_are_saved(
    aiohttp_client: Any, tmp_path: Path, node_sdk: Path
) -> None:
    """On today's main NUM_EQ "1_000" and "\\u0665" and DATE_AFTER "2024-W01-1" are saved
    (200), and the Node SDK reads them as NaN."""
    accepted = await accepted_values(await aiohttp_client(build_app(standalone_settings(tmp_path))))
    for refused in (("NUM_EQ", "1_000"), ("NUM_EQ", ARABIC_FIVE), ("DATE_AFTER", "2024-W01-1")):
        assert refused not in accepted
    assert len(accepted) >= 15, accepted  # the usual forms are all still taken
    for (operator, value), read in zip(accepted, sdk_reads(node_sdk, accepted), strict=True):
        assert read == ours(operator, value), (operator, value, read)


def engine_holds(operator: str, value: str, context: str) -> bool:
    """Whether the Python SDK's engine (yggdrasil, shared by most SDKs) enables a flag with
    the one constraint, for the context value ``context``."""
    engine = UnleashEngine()
    constraint = {"contextName": "x", "operator": operator, "value": value}
    strategy = {"name": "default", "parameters": {}, "constraints": [constraint]}
    engine.take_state(
        json.dumps(
            {"version": 1, "features": [{"name": "f", "enabled": True, "strategies": [strategy]}]}
        )
    )
    enabled: bool = engine.is_enabled("f", {"properties": {"x": context}}).is_enabled
    return enabled


def instant(milliseconds: int) -> str:
    moment = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=milliseconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def test_the_python_sdk_evaluates_every_value_we_accept(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """On the merged main DATE_AFTER "2024-01-01T00:00:00.123456789Z" (any fraction but
    milliseconds) was saved, and yggdrasil holds it false both before and after it."""
    accepted = await accepted_values(await aiohttp_client(build_app(standalone_settings(tmp_path))))
    assert ("DATE_AFTER", "2024-01-01T00:00:00.123+05:30") in accepted
    first, last = (
        ours("DATE_AFTER", v) for v in ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59.999Z")
    )
    for operator, value in accepted:
        if operator != "DATE_AFTER":
            assert engine_holds(operator, value, value), (operator, value)
            continue
        at = ours(operator, value)
        for moment, holds, fails in ((at + 1, "AFTER", "BEFORE"), (at - 1, "BEFORE", "AFTER")):
            if first <= moment <= last:
                assert engine_holds(f"DATE_{holds}", value, instant(moment)), value
                assert not engine_holds(f"DATE_{fails}", value, instant(moment)), value


async def test_a_value_an_older_version_saved_is_read_back_as_saved(
    client: Any, tmp_path: Path, database_url: str | None
) -> None:
    """Checks apply to what is written: a stored constraint today's checks refuse is shown
    (and served) as it is, never a 500, and the operator can replace it."""
    await create_flag(client, "checkout")
    number = {"contextName": "n", "operator": "NUM_EQ", "value": "5"}
    saved = await ok(
        client,
        "POST",
        f"{env_path('checkout')}/strategies",
        {"name": "default", "constraints": [number]},
    )
    db = central_database(standalone_settings(tmp_path / "data", database_url=database_url))
    await db.open()
    try:
        async with db.transaction() as tx:
            await tx.execute(
                "UPDATE feature_strategies SET constraints = ? WHERE id = ?",
                (json.dumps([{**number, "value": "1_000"}]), saved["id"]),
            )
    finally:
        await db.close()
    one = f"{env_path('checkout')}/strategies/{saved['id']}"
    read = await ok(client, "GET", one)
    assert read["constraints"][0]["value"] == "1_000"
    replace = {"name": "default", "constraints": read["constraints"]}
    status, answer = await call(client, "PUT", one, replace)
    assert status == 400 and answer["details"][0]["path"].endswith("/constraints/0/value")
