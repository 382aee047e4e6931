"""Failed authentications counted per client address, so keys cannot be guessed at speed.

Each address has a budget of ``auth_failure_limit`` keys checked in vain, refilled evenly
over ``auth_failure_window`` seconds (a token bucket). Checking a key the service does not
already know spends from it first (so many requests at once cannot overdraw it by more than
they carry), and a key found valid, or one that could not be checked (upstream down), gives
it back: only invalid keys cost. An address whose budget is spent gets 429 with
``Retry-After`` for any key not already known valid, without that key being checked, so a
guess is never answered. Keys already known valid (``KeyResolver.known``) pass whatever the
budget: a caller with a valid key is never slowed by others guessing from its address.

The address is the caller's (``relay.api.client_address``): the socket's peer, or behind a
trusted reverse proxy (``trust_proxy``) the address it forwarded, so callers behind one proxy
do not share one budget (docs/operations.md, "Limits"). IPv6 addresses count per /64, the block a
single host usually has. The budgets are the service's, whichever worker a request reaches
(``relay.api.shared``: at most ``ADDRESS_SLOTS`` addresses owing, the least recently charged
of a neighbourhood forgotten first).
"""

from __future__ import annotations

import collections
import ipaddress
from collections.abc import Sequence

from prometheus_client import Counter

from relay.api.errors import TooManyRequests
from relay.api.shared import Shared

FAILURES = Counter(
    "relay_auth_failures_total", "Keys presented that are not valid (guesses, typos, revoked)"
)
THROTTLED = Counter(
    "relay_auth_throttled_total",
    "Requests refused with 429 because their address presented too many invalid keys",
)

REFUSAL_DELAY = 1.0  # seconds a 429 for a spent budget is held back (``relay.api.auth``)


class FailureLimit:
    def __init__(self, shared: Shared, limit: int, window: float) -> None:
        """``limit`` 0: no limit. The budgets are the service's, in the memory its workers
        share (``relay.api.shared``): a caller's connections landing on several workers
        spend one budget."""
        self._shared = shared
        self._limit = float(limit)
        self._rate = limit / window
        self._checking: collections.Counter[str] = collections.Counter()  # key: requests

    def spend(self, address: str, keys: Sequence[str]) -> int:
        """Take ``keys`` from the address's budget before checking them; TooManyRequests if
        it is spent. A key another request of this worker is checking now is not charged:
        it joins that check (2,000 SDKs sharing a new key, started at once, cost one key,
        not a budget each), and is charged by ``settle`` should it prove invalid. The
        budget may go below zero by what the requests at once carry. How many were
        charged, for ``settle``."""
        fresh = sum(1 for key in keys if not self._checking[key])
        if self._limit and fresh:
            budget = self._shared.charge(address, -fresh, self._limit, self._rate)
            if budget < 1:
                self._shared.charge(address, fresh, self._limit, self._rate)  # nothing checked
                THROTTLED.inc()
                wait = (1 - budget) / self._rate
                raise TooManyRequests(
                    "Too many invalid API keys from this address; retry later with a valid key",
                    retry_after=wait,
                )
        self._checking.update(keys)
        return fresh

    def settle(self, address: str, keys: Sequence[str], charged: int, invalid: int) -> None:
        """``keys``, checked, ``invalid`` of them invalid (0 when nothing was learnt): only
        those cost; what valid ones had taken is given back."""
        self._checking.subtract(keys)
        for key in keys:
            if self._checking[key] <= 0:
                del self._checking[key]
        if self._limit and charged != invalid:
            self._shared.charge(address, charged - invalid, self._limit, self._rate)


def client_address(remote: str | None) -> str:
    """The address a budget is kept for: IPv4 as is, IPv6 by its /64."""
    if not remote:
        return "local"  # a Unix socket, or a peer already gone
    try:
        address = ipaddress.ip_address(remote)
    except ValueError:
        return remote
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
