"""Open files: every connection holds a file descriptor, and the usual soft limit (1,024)
refuses connections long before memory or the hard limit would: it is raised to the hard
limit.
When the process runs out of them all the same, asyncio reports every failed ``accept``
with a traceback, many times a second for as long as it lasts (14,787 times in 20 s, 7.6 MB
of log). They are counted, and logged once per ``ACCEPT_LOG_INTERVAL`` with their number.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

from aiohttp import web
from prometheus_client import Counter

log = logging.getLogger(__name__)

ACCEPT_LOG_INTERVAL = 10.0
_ACCEPT_FAILED = "socket.accept() out of system resource"

ACCEPT_ERRORS = Counter(
    "relay_accept_errors_total",
    "Connections the server could not accept for lack of a resource (open files, memory)",
)


class _AcceptErrors:
    """The event loop's exception handler: failed accepts counted and logged once per
    interval, with how many there were since the last line (the connections wait in the
    listen queue meanwhile); anything else as asyncio would."""

    def __init__(self) -> None:
        self._next = 0.0
        self._count = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != _ACCEPT_FAILED:
            loop.default_exception_handler(context)
            return
        ACCEPT_ERRORS.inc()
        self._count += 1
        now = time.monotonic()
        if now < self._next:
            return
        extra = {"error": str(context.get("exception")), "count": self._count}
        log.error("connections not accepted: %s", _ACCEPT_FAILED, extra=extra)
        self._next, self._count = now + ACCEPT_LOG_INTERVAL, 0


async def open_files(app: web.Application) -> None:
    """``on_startup``, after the mode's resources opened (an error there is one line): the
    open-file limit raised, failed accepts counted on the loop that serves ``app``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            log.info("open files", extra={"limit": hard, "was": soft})
        except (ValueError, OSError):  # an unlimited hard limit: more than the kernel allows
            log.info("open files", extra={"limit": soft, "hard": "unlimited"})
    asyncio.get_running_loop().set_exception_handler(_AcceptErrors())
