"""The keys of the Frontend API's tests, and the metrics a browser SDK posts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

FRONT_KEY = "default:development.front-secret-for-tests-0123456789"
FRONTEND_KEY = "default:development.frontend-secret-for-tests-0123456789"


def browser_metrics(feature: str = "banner", yes: int = 3, no: int = 1) -> dict[str, Any]:
    """What unleash-proxy-client's metrics.ts posts (``instanceId`` "browser", no
    environment: it comes from the key), for the current hour."""
    now = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    return {
        "appName": "shop-web",
        "instanceId": "browser",
        "bucket": {
            "start": now,
            "stop": now,
            "toggles": {feature: {"yes": yes, "no": no, "variants": {"blue": yes}}},
        },
    }
