"""Relays' reports as a tree: each report carries those of the relays below it
(``connectedEdges``); the central service keeps one record per relay, each with the relay it
came through."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from relay.core.keys import Principal
from relay.wire.edges import MAX_REPORTED, EdgeInstanceData

STALE_AFTER = 3
"""Report intervals without a report after which a relay is shown stale."""


@dataclass(frozen=True, slots=True)
class ReportScope:
    """Whose reports these are: the environment and projects of the client key that posted
    them. Identifiers are chosen by whoever reports, so they are unique only within one."""

    environment: str
    projects: tuple[str, ...]

    @classmethod
    def of(cls, principal: Principal) -> ReportScope:
        return cls(principal.environment, tuple(sorted(principal.projects)))


@dataclass(frozen=True, slots=True)
class ReportedEdge:
    identifier: str
    app_name: str
    via: str | None
    report: EdgeInstanceData
    """Without the reports below it (``connectedEdges`` emptied)."""


def flatten(report: EdgeInstanceData, limit: int = MAX_REPORTED) -> list[ReportedEdge]:
    """The relays of a report, breadth first, at most ``limit``; a relay named twice (a
    loop, or two relays given one identifier) is taken where it is first seen."""
    found: dict[str, ReportedEdge] = {}
    waiting: deque[tuple[EdgeInstanceData, str | None]] = deque([(report, None)])
    while waiting and len(found) < limit:
        node, via = waiting.popleft()
        if node.identifier in found:
            continue
        alone = node.model_copy(update={"connectedEdges": []})
        found[node.identifier] = ReportedEdge(node.identifier, node.appName, via, alone)
        waiting.extend((below, node.identifier) for below in node.connectedEdges)
    return list(found.values())
