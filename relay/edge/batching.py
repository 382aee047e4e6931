"""Pure: buffered rows -> bulk bodies for the upstream, each at most ``max_bytes``.

Bodies are ``bulkMetricsSchema`` JSON. Registrations always carry ``started`` and
``interval``: a real Unleash answers 400 to a bulk registration without them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

Entry = dict[str, Any]

_EMPTY = len(b'{"applications":[],"metrics":[]}')


def _encode(entry: Entry) -> bytes:
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()


def body(applications: list[Entry], metrics: list[Entry]) -> bytes:
    return json.dumps(
        {"applications": applications, "metrics": metrics},
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()


def cut(
    applications: Iterable[Entry], metrics: Iterable[Entry], max_bytes: int
) -> Iterator[tuple[bytes, int]]:
    """Bodies of at most ``max_bytes`` (a single larger entry travels alone), with their entry
    counts. Registrations come first, so a small flush is one request."""
    apps: list[Entry] = []
    mets: list[Entry] = []
    size = _EMPTY
    for kind, entry in _tagged(applications, metrics):
        grows = len(_encode(entry)) + 1
        if (apps or mets) and size + grows > max_bytes:
            yield body(apps, mets), len(apps) + len(mets)
            apps, mets, size = [], [], _EMPTY
        (apps if kind == "a" else mets).append(entry)
        size += grows
    if apps or mets:
        yield body(apps, mets), len(apps) + len(mets)


def _tagged(applications: Iterable[Entry], metrics: Iterable[Entry]) -> Iterator[tuple[str, Entry]]:
    for entry in applications:
        yield "a", entry
    for entry in metrics:
        yield "m", entry


def halves(payload: bytes) -> tuple[tuple[bytes, int], tuple[bytes, int]] | None:
    """Split a body in two for an upstream that found it too large; None for one entry."""
    decoded = json.loads(payload)
    entries = [("a", e) for e in decoded["applications"]] + [("m", e) for e in decoded["metrics"]]
    if len(entries) < 2:
        return None
    middle = len(entries) // 2
    parts = []
    for part in (entries[:middle], entries[middle:]):
        apps = [e for kind, e in part if kind == "a"]
        mets = [e for kind, e in part if kind == "m"]
        parts.append((body(apps, mets), len(part)))
    return parts[0], parts[1]
