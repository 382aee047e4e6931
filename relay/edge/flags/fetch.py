"""One fetch of a scope's flags from the upstream, reduced to what the flag cache does next.

The relay asks ``{upstream}/api/client/features`` with a key of the scope, no query (the
relay filters locally) and ``Unleash-Client-Spec: UPSTREAM_SPEC``, so segments come as ids
and one answer serves SDKs of every version. Only the body and the ETag are kept: no
header of the upstream's reaches SDKs (its ``fetch-mode`` is for the relay's own choice,
``relay.edge.flags.follow``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from relay.edge.upstream import UpstreamClient, UpstreamUnavailable

UPSTREAM_SPEC = "5.2.0"
MAX_ETAG = 1024


class Fetch(enum.Enum):
    NEW = "new"  # 200
    SAME = "same"  # 304
    REFUSED = "refused"  # 401, 403
    FAILED = "failed"  # anything else, or no answer


@dataclass(frozen=True, slots=True)
class Fetched:
    outcome: Fetch
    status: int | None = None
    body: bytes = b""
    etag: str = ""
    error: str = ""


class Fetcher:
    def __init__(self, upstream: UpstreamClient, identity: Mapping[str, str]) -> None:
        """``identity``: headers naming the relay (``Unleash-AppName``...)."""
        self.upstream, self.identity = upstream, identity
        self._headers = {"Accept": "application/json", "Unleash-Client-Spec": UPSTREAM_SPEC}
        self._headers.update(identity)

    async def fetch(self, key: str, etag: str | None) -> Fetched:
        """Timed in ``relay_upstream_request_duration_seconds{operation="features"}``."""
        headers = {**self._headers, "Authorization": key}
        if etag:
            headers["If-None-Match"] = etag
        try:
            got = await self.upstream.forward(
                "GET", "/api/client/features", headers, None, "features"
            )
        except UpstreamUnavailable as exc:
            return Fetched(Fetch.FAILED, error=str(exc))
        if got.status == 200:
            return Fetched(Fetch.NEW, 200, got.body, _etag(got.headers.get("ETag", "")))
        if got.status == 304 and etag:
            return Fetched(Fetch.SAME, 304)
        if got.status in (401, 403):
            return Fetched(Fetch.REFUSED, got.status)
        return Fetched(Fetch.FAILED, got.status, error=f"the upstream answered {got.status}")


def _etag(etag: str) -> str:
    """The upstream's ETag if it can be one (printable ASCII, as RFC 9110 has it, and short
    enough to store and send back); else none, and each refresh is a full answer."""
    return etag if len(etag) <= MAX_ETAG and etag.isascii() and etag.isprintable() else ""
