"""The yardstick: an aiohttp app whose only work is parsing and validating the bulk body with
the same pydantic model. The relay's figures are read against it, since this machine's
speed drifts between sessions."""

from __future__ import annotations

import sys

from aiohttp import web

from relay.wire.client import BulkMetrics


async def bulk(request: web.Request) -> web.Response:
    BulkMetrics.model_validate_json(await request.read())
    return web.Response(status=202)


async def ready(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def main() -> None:
    app = web.Application(client_max_size=1024 * 1024)
    app.router.add_post("/api/client/metrics/bulk", bulk)
    app.router.add_get("/ready", ready)
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)


if __name__ == "__main__":
    main()
