"""Impact metrics as an SDK sends them, the series a standalone serves, and names that
are four bytes a character in UTF-8."""

from __future__ import annotations

from typing import Any

from conftest import (
    ADMIN_KEY,
    auth,
)

LABELS = {"appName": "shop", "environment": "development", "featureName": "f1"}


def impact(counter: float, gauge: float, observed: list[float]) -> list[dict[str, Any]]:
    bounds = [0.1, 0.5, 1]
    buckets = [{"le": b, "count": sum(1 for o in observed if o <= b)} for b in bounds]
    return [
        {
            "name": "checkouts",
            "help": "Checkouts",
            "type": "counter",
            "samples": [{"labels": LABELS, "value": counter}],
        },
        {
            "name": "cart",
            "help": "Cart size",
            "type": "gauge",
            "samples": [{"labels": LABELS, "value": gauge}],
        },
        {
            "name": "latency",
            "help": "Latency",
            "type": "histogram",
            "buckets": bounds,
            "samples": [
                {
                    "labels": LABELS,
                    "count": len(observed),
                    "sum": sum(observed),
                    "buckets": [*buckets, {"le": "+Inf", "count": len(observed)}],
                }
            ],
        },
    ]


async def series(client: Any, query: str = "") -> dict[str, dict[str, Any]]:
    response = await client.get(f"/api/admin/metrics/impact{query}", headers=auth(ADMIN_KEY))
    assert response.status == 200
    return {s["name"]: s for s in (await response.json())["series"]}


# 255 characters, 1,020 bytes in UTF-8; varied, as PostgreSQL compresses repeated ones
FOUR_BYTES = "".join(chr(0x20000 + (i * 7919) % 0xA000) for i in range(255))
