"""Which key an environment's counts are sent upstream with: its ``upstream_tokens`` key,
else an SDK key of that environment the upstream vouched for (it answered that key's flags:
``relay.edge.flags.cache``), as Unleash Edge sends with the keys it knows. Counts wait only
while no key of their environment is known at all; then the log (once), ``/ready``'s body
and ``relay_environments_without_key`` say so.

A borrowed key is named in the log by its scope and a fingerprint (a prefix of its SHA-256),
never by its secret, and chosen again before each flush: one the upstream stops answering
gives way to another.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping

from prometheus_client import Gauge

from relay.core.keys import hash_key, redact

log = logging.getLogger(__name__)

WITHOUT_KEY = Gauge(
    "relay_environments_without_key",
    "Environments whose counts wait: no upstream_tokens key, and no SDK key the upstream"
    " vouched for",
    multiprocess_mode="livemax",
)


def named(key: str) -> str:
    """A key as logs name it: its scope and fingerprint, nothing to use."""
    return f"{redact(key)} (sha256 {hash_key(key)[:8]})"


class UpstreamKeys:
    def __init__(self, configured: Mapping[str, str], vouched: Callable[[str], str | None]) -> None:
        """``configured``: environment -> its ``upstream_tokens`` key; ``vouched``: an SDK
        key of an environment the upstream answered, or None."""
        self._configured = dict(configured)
        self._vouched = vouched
        self._borrowed: dict[str, str] = {}  # environment -> the SDK key last chosen
        self.waiting: frozenset[str] = frozenset()  # environments without any key

    def choose(self, environments: Collection[str]) -> dict[str, str]:
        """The key of each environment that has one, for ``environments`` (those with
        counts buffered) and the configured ones."""
        chosen = dict(self._configured)
        waiting = set()
        for environment in sorted(set(environments) - set(chosen)):
            key = self._vouched(environment)
            if key is None:
                waiting.add(environment)
                continue
            chosen[environment] = key
            if self._borrowed.get(environment) != key:
                log.warning(
                    "no upstream key for this environment: its counts are sent with an SDK"
                    " key the upstream vouched for; add one to RELAY_UPSTREAM_TOKENS to choose",
                    extra={"environment": environment, "key": named(key)},
                )
                self._borrowed[environment] = key
        for environment in sorted(waiting - self.waiting):
            log.error(
                "no key for this environment: its counts stay buffered until an SDK key of"
                " it is answered upstream, or RELAY_UPSTREAM_TOKENS has one",
                extra={"environment": environment},
            )
        self.waiting = frozenset(waiting)
        WITHOUT_KEY.set(len(waiting))
        return chosen
