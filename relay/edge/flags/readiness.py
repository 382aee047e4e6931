"""When a relay is ready to serve flags (``Readiness``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from relay.core.keys import Principal
from relay.edge.flags.entries import Entry


class Readiness:
    """Ready once every configured key (``client_tokens``) has a copy of its scope, fresh or
    stored, or was refused by the upstream (which has then answered for it): told once."""

    def __init__(self, configured: Mapping[str, Principal], on_ready: Callable[[], None]) -> None:
        self._configured = configured
        self._settled: set[str] = set()  # configured keys refused
        self._on_ready: Callable[[], None] | None = on_ready

    def settle(self, key: str) -> None:
        if key in self._configured:
            self._settled.add(key)

    def check(self, entry_of: Callable[[str, Principal], Entry | None]) -> None:
        if self._on_ready is None:
            return
        for key, principal in self._configured.items():
            entry = entry_of(key, principal)
            if key not in self._settled and (entry is None or entry.rendered is None):
                return
        self._on_ready()
        self._on_ready = None
