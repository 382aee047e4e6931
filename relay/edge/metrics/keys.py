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

import json
import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from prometheus_client import Gauge

from relay.api.shared import NOTE_BYTES, Shared
from relay.core.keys import hash_key, redact
from relay.edge.flags.entries import Entry, vouched

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


class Notes:
    """What this worker tells the others through the memory they share (``Shared.note``):
    the SDK keys it can lend the flusher (per environment, one the upstream answered flags
    to: only the worker that served the SDK knows the key, and keys are kept nowhere on
    disk), and, from the leader, the environments whose counts wait for a key (``/ready``
    says the same whichever worker answers)."""

    def __init__(self, shared: Shared) -> None:
        self._shared = shared
        self._keys: dict[str, str] = {}
        self._waiting: list[str] = []

    def lend(self, keys: Mapping[str, str]) -> None:
        if dict(keys) != self._keys:
            self._keys = dict(keys)
            self._write()

    def borrow(self, environment: str) -> str | None:
        """A key another worker lends for ``environment``."""
        return self.lent().get(environment)

    def lent(self) -> dict[str, str]:
        """Environment -> a key some worker lends for it (the first worker's that does)."""
        lent: dict[str, str] = {}
        for worker in reversed(range(self._shared.workers)):
            keys = self._read(worker).get("keys")
            if isinstance(keys, dict):
                lent.update((e, k) for e, k in keys.items() if isinstance(k, str))
        return lent

    def wait(self, waiting: frozenset[str]) -> None:
        self._waiting = sorted(waiting)
        self._write()

    @property
    def waiting(self) -> frozenset[str]:
        waiting = self._read(0).get("waiting", [])
        return frozenset(w for w in waiting if isinstance(w, str))

    def _write(self) -> None:
        keys = dict(self._keys)
        text = json.dumps({"waiting": self._waiting, "keys": keys}).encode()
        while len(text) > NOTE_BYTES - 16 and keys:  # a key less, never a cut text
            keys.popitem()
            text = json.dumps({"waiting": self._waiting, "keys": keys}).encode()
        self._shared.note(text)

    def _read(self, worker: int) -> dict[str, Any]:
        try:
            note = json.loads(self._shared.noted(worker) or b"{}")
        except ValueError:
            return {}
        return note if isinstance(note, dict) else {}


class Lending:
    """The SDK keys the upstream vouched for, per environment: one of this worker's flag
    copies (``copies``) else one another worker lends (``Notes``); this worker lends its
    own for the environments without a ``configured`` key."""

    def __init__(
        self, copies: Callable[[], Iterable[Entry]], notes: Notes, configured: Collection[str]
    ) -> None:
        self._copies = copies
        self._notes = notes
        self._configured = frozenset(configured)

    def __call__(self, environment: str) -> str | None:
        return vouched(self._copies(), environment) or self._notes.borrow(environment)

    def any(self) -> str | None:
        """A key the upstream vouched for, of the first environment by name that has one:
        what the relay's report goes with when it has no upstream key, whether or not any
        counts are buffered (counts that wait for a key are what it most has to say)."""
        environments = {*(e.scope.environment for e in self._copies()), *self._notes.lent()}
        return next(filter(None, map(self, sorted(environments))), None)

    async def lend(self) -> None:
        """This worker's SDK keys the leader's flusher may send counts with."""
        environments = {e.scope.environment for e in self._copies()} - self._configured
        lent = {env: vouched(self._copies(), env) for env in sorted(environments)}
        self._notes.lend({env: key for env, key in lent.items() if key is not None})


class UpstreamKeys:
    def __init__(
        self,
        configured: Mapping[str, str],
        vouched: Callable[[str], str | None],
        notes: Notes,
    ) -> None:
        """``configured``: environment -> its ``upstream_tokens`` key; ``vouched``: an SDK
        key of an environment the upstream answered (this worker's, else one another
        worker lends), or None; ``notes``: where the environments without a key are said
        for every worker."""
        self._configured = dict(configured)
        self._vouched = vouched
        self._notes = notes
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
        if waiting != self.waiting:
            self._notes.wait(frozenset(waiting))
        self.waiting = frozenset(waiting)
        WITHOUT_KEY.set(len(waiting))
        return chosen
