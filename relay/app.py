"""The composition root: the one place that knows which mode runs. Each mode's wiring sits
in its own package, next to what it wires (``relay.central.wiring``, ``relay.edge.wiring``).

In code the modes have names that cannot be confused with the product's: the standalone
mode's internals are ``central``, the relay mode's are ``edge`` (offline mode, a relay
without an upstream, is ``relay.edge.offline``).
"""

from __future__ import annotations

from aiohttp import web

from relay.api.shared import Shared, layout
from relay.settings import Mode, Settings


def build_app(settings: Settings, shared: Shared | None = None) -> web.Application:
    """``shared``: the region this worker shares with the others, which knows its index
    (``relay.process.server``; worker 0 is the leader, which runs the jobs there must be one
    of); None for a service of one process."""
    shared = shared or Shared.private(layout(settings))
    match settings.mode:  # each mode's modules only: a relay holds none of the standalone's
        case Mode.CENTRAL:
            from relay.central import wiring as central

            return central.build(settings, shared)
        case Mode.EDGE:
            from relay.edge import wiring as edge

            return edge.build(settings, shared)
        case Mode.OFFLINE:
            from relay.edge import offline

            return offline.build(settings, shared)


async def initialise(settings: Settings) -> None:
    """Start-up work done once before several workers start, so they never race on it."""
    match settings.mode:
        case Mode.CENTRAL:
            from relay.central import wiring as central

            await central.initialise(settings)
        case Mode.EDGE:
            from relay.edge import wiring as edge

            await edge.initialise(settings)
        case Mode.OFFLINE:
            from relay.edge import offline

            await offline.initialise(settings)
