"""``POST /api/frontend/client/metrics`` and ``/register`` (and the legacy ``/api/proxy``
paths): what browser and mobile SDKs send with a frontend key. Their bodies are those of
``/api/client`` (the browser SDK posts ``clientMetricsSchema``, ``instanceId`` "browser"),
so they take the same handlers and the same durable ingest path; as for client keys, the
environment is the key's, never the body's (as Unleash and Edge do). Answered 202 once
stored, as Edge does (Unleash answers 200; SDKs read neither)."""

from __future__ import annotations

from relay.api.auth import FRONTEND_KEYS
from relay.api.client import client_metrics, client_route, register
from relay.wire.client import ClientMetrics, ClientRegistration

_PATHS = (("/api/frontend", "Frontend", ""), ("/api/proxy", "Proxy", " (legacy path)"))
_POSTS = (
    ("metrics", client_metrics, "Send a frontend SDK's metrics bucket", ClientMetrics),
    ("register", register, "Register a frontend SDK instance", ClientRegistration),
)

ROUTES = [
    client_route(
        f"{prefix}/client/{name}",
        handler,
        summary + legacy,
        body,
        FRONTEND_KEYS,
        "frontend",
        operation=f"{handler.__name__}{kind}",
    )
    for prefix, kind, legacy in _PATHS
    for name, handler, summary, body in _POSTS
]
