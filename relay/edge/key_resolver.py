"""Which SDK keys a relay accepts: its configured keys, and keys the upstream vouched for.

An unknown key is checked once against the upstream's ``/edge/validate`` and the answer is
cached (valid keys for ``key_cache_ttl``, invalid ones briefly). While the upstream cannot be
reached, keys validated before keep working, even past their TTL, and an unknown key gets
503, not 401: the Node SDK stops sending for good on 401 but retries on 5xx.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable

from relay.core.errors import Unavailable
from relay.core.keys import Principal, hash_key, parse_key
from relay.edge.upstream import UpstreamClient, UpstreamUnavailable
from relay.wire.common import KeyType

log = logging.getLogger(__name__)

NEGATIVE_TTL = 60.0
MAX_CACHED = 10_000


class SdkKeyResolver:
    def __init__(self, configured: Iterable[str], upstream: UpstreamClient, ttl: float) -> None:
        self._configured = {
            hash_key(spec.secret): spec.principal
            for spec in (parse_key(key, KeyType.CLIENT) for key in configured)
        }
        self._upstream = upstream
        self._ttl = ttl
        # key hash -> (principal or None for invalid, expiry); least recently used first
        self._cache: OrderedDict[str, tuple[Principal | None, float]] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[Principal | None]] = {}

    async def resolve(self, key: str) -> Principal | None:
        digest = hash_key(key)
        configured = self._configured.get(digest)
        if configured is not None:
            return configured
        cached = self._cache.get(digest)
        if cached is not None and cached[1] > time.monotonic():
            self._cache.move_to_end(digest)
            return cached[0]
        pending = self._inflight.get(digest)
        if pending is not None:  # one upstream call per key, however many requests wait
            return await asyncio.shield(pending)
        future: asyncio.Future[Principal | None] = asyncio.get_running_loop().create_future()
        self._inflight[digest] = future
        try:
            principal = await self._ask_upstream(key, digest, cached)
            future.set_result(principal)
            return principal
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here; waiters re-raise it
            raise
        finally:
            del self._inflight[digest]

    async def _ask_upstream(
        self, key: str, digest: str, stale: tuple[Principal | None, float] | None
    ) -> Principal | None:
        try:
            valid = await self._upstream.validate([key])
        except UpstreamUnavailable as exc:
            if stale is not None and stale[0] is not None:
                return stale[0]
            log.warning(
                "cannot validate an SDK key: upstream unavailable", extra={"error": str(exc)}
            )
            raise Unavailable(
                "Cannot validate the API key now: the upstream is unavailable, retry later"
            ) from None
        principal = valid.get(key)
        ttl = self._ttl if principal is not None else NEGATIVE_TTL
        self._cache[digest] = (principal, time.monotonic() + ttl)
        self._cache.move_to_end(digest)
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)
        return principal
