"""OFREP's evaluations counted as SDK usage: per flag answered, for the context's
``appName`` in the key's environment, through the durable ingest path; at a relay, carried
upstream once.
"""

from __future__ import annotations

from conftest import MakeClient, raw
from ofrepkit import FRONT, build, evaluate, one_path
from sdks import VARIANT_SEED, bucket
from service import eventually


async def test_evaluations_are_counted_for_the_app_in_the_key_s_environment(
    make_client: MakeClient,
) -> None:
    """Each flag answered counts as an SDK's evaluation would (yes/no, the variant), for
    the context's appName in the key's environment (never the context's); failures do not."""
    client = await make_client(init_frontend_api_tokens=[FRONT])
    await build(client)
    context = {"targetingKey": "erin", "appName": "shop", "environment": "production"}
    for _ in range(3):
        assert (await evaluate(client, context=context))[0] == 200
    assert (await evaluate(client, one_path("split"), context))[0] == 200
    assert (await evaluate(client, one_path("broken"), context))[0] == 400
    side = "left" if bucket("split", "erin", 1000, VARIANT_SEED) <= 500 else "right"

    async def counted() -> bool:
        rows = await raw(client, "split")
        return bool(rows) and rows[0]["yes"] == 4

    await eventually(counted, "the counts written")
    (row,) = await raw(client, "split")
    assert (row["appName"], row["environment"]) == ("shop", "development")
    assert (row["yes"], row["no"], row["variants"]) == (4, 0, {side: 4})
    (off,) = await raw(client, "off")
    assert (off["yes"], off["no"], off["variants"]) == (0, 3, {})
    assert await raw(client, "broken") == []
    # without an appName, the Frontend API's default names the application
    await evaluate(client, one_path("on"), {"targetingKey": "erin"})

    async def default_app() -> bool:
        return any(r["appName"] == "frontend-api" for r in await raw(client, "on"))

    await eventually(default_app, "counted for frontend-api")
