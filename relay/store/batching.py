"""Pure: buffered counts -> bulk bodies the upstream accepts.

Bodies are ``bulkMetricsSchema`` JSON within every limit the upstream checks: at most
``max_bytes`` (a single larger entry travels alone), at most 1,000 registrations, 10,000
metric entries and 1,000 impact metric samples in at most 100 impact metrics, and entries
within the limits of one entry. A buffered total is a sum over
many requests, so it may pass an entry's limits (a count above 2^31-1, more than 100
variants): it then goes out as several entries for the same key, which the upstream adds
up again. Impact metrics are cut one sample at a time (an entry), and the samples of one
metric in a body are sent together under it. Registrations always carry ``started`` and
``interval``: a real Unleash answers 400 to a bulk registration without them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from relay.wire.common import MAX_APPLICATIONS, MAX_COUNT, MAX_METRICS, MAX_VARIANTS
from relay.wire.impact import MAX_IMPACT_METRICS, MAX_IMPACT_SAMPLES

Entry = dict[str, Any]
Piece = tuple[int, int, dict[str, int]]
"""The counts of one entry: yes, no, variants."""

_EMPTY = len(b'{"applications":[],"metrics":[]}')


def pieces(yes: int, no: int, variants: dict[str, int], budget: int) -> tuple[list[Piece], Piece]:
    """A buffered key's counts as at most ``budget`` (>= 1) entries within an entry's limits,
    and what is left for a later batch (all zero and no variants when everything fits).

    A sum of 2^40 needs 512 entries; one of 2^62 more than a batch can carry, so it leaves
    in steps. ``yes`` and ``no`` are spread evenly, so that every entry of a split key
    carries some of them when there are enough (Unleash ignores entries with yes = no = 0)."""
    if (
        yes <= MAX_COUNT
        and no <= MAX_COUNT
        and len(variants) <= MAX_VARIANTS
        and all(count <= MAX_COUNT for count in variants.values())
    ):
        return [(yes, no, variants)], (0, 0, {})
    slots, rest = _variant_slots(variants, budget)
    taken = min(budget, max(len(slots), _parts(yes), _parts(no)))
    took_yes, took_no = min(yes, taken * MAX_COUNT), min(no, taken * MAX_COUNT)
    entries = [
        (_share(took_yes, taken, i), _share(took_no, taken, i), slots[i] if i < len(slots) else {})
        for i in range(taken)
    ]
    return entries, (yes - took_yes, no - took_no, rest)


def _parts(count: int) -> int:
    return max(1, -(-count // MAX_COUNT))


def _share(total: int, parts: int, index: int) -> int:
    return total // parts + (1 if index < total % parts else 0)


def _variant_slots(
    variants: dict[str, int], limit: int
) -> tuple[list[dict[str, int]], dict[str, int]]:
    """Variant counts placed in at most ``limit`` entries of at most ``MAX_VARIANTS`` names,
    each count cut in parts of at most ``MAX_COUNT`` in consecutive entries (so a name is
    never twice in one entry); the counts that did not fit."""
    slots: list[dict[str, int]] = []
    rest: dict[str, int] = {}
    first_open = 0
    for name in sorted(variants):
        count, index, placed = variants[name], first_open, False
        while (count or not placed) and index < limit:
            if index == len(slots):
                slots.append({})
            if len(slots[index]) < MAX_VARIANTS:
                part = min(count, MAX_COUNT)
                slots[index][name] = part
                count, placed = count - part, True
            index += 1
        if count or not placed:
            rest[name] = count
        while first_open < len(slots) and len(slots[first_open]) >= MAX_VARIANTS:
            first_open += 1
    return slots, rest


def _encode(entry: Entry) -> bytes:
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False).encode()


def body(applications: list[Entry], metrics: list[Entry], impact: Sequence[Entry] = ()) -> bytes:
    """``impact``: metrics of one sample each, grouped here by metric; ``impactMetrics`` is
    left out when there are none, for an upstream that knows nothing of them."""
    document: Entry = {"applications": applications, "metrics": metrics}
    if impact:
        document["impactMetrics"] = _grouped(impact)
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode()


def _metric_of(entry: Entry) -> str:
    return _encode({k: v for k, v in entry.items() if k != "samples"}).decode()


def _grouped(impact: Sequence[Entry]) -> list[Entry]:
    metrics: dict[str, Entry] = {}
    for entry in impact:
        metric = metrics.setdefault(_metric_of(entry), {**entry, "samples": []})
        metric["samples"] += entry["samples"]
    return list(metrics.values())


class _Body:
    """A body being filled: its entries by kind, its size, the impact metrics it names."""

    def __init__(self) -> None:
        self.entries: dict[str, list[Entry]] = {"a": [], "m": [], "i": []}
        self.size = _EMPTY
        self.metrics: set[str] = set()

    def full_for(self, kind: str, entry: Entry, grows: int, max_bytes: int) -> bool:
        if not any(self.entries.values()):
            return False
        if kind == "i":
            named = len(self.metrics | {_metric_of(entry)})
            full = len(self.entries["i"]) >= MAX_IMPACT_SAMPLES or named > MAX_IMPACT_METRICS
        else:
            full = len(self.entries[kind]) >= (MAX_APPLICATIONS if kind == "a" else MAX_METRICS)
        return full or self.size + grows > max_bytes

    def add(self, kind: str, entry: Entry, grows: int) -> None:
        self.entries[kind].append(entry)
        self.size += grows
        if kind == "i":
            self.metrics.add(_metric_of(entry))

    def done(self) -> tuple[bytes, int]:
        e = self.entries
        return body(e["a"], e["m"], e["i"]), sum(map(len, e.values()))


def cut(
    applications: Iterable[Entry],
    metrics: Iterable[Entry],
    max_bytes: int,
    impact: Iterable[Entry] = (),
) -> Iterator[tuple[bytes, int]]:
    """Bodies of at most ``max_bytes`` (a single larger entry travels alone) within the
    module docstring's limits, with their entry counts. Registrations come first, so a small
    flush is one request."""
    current = _Body()
    for kind, entry in _tagged(applications, metrics, impact):
        grows = len(_encode(entry)) + 1
        if current.full_for(kind, entry, grows, max_bytes):
            yield current.done()
            current = _Body()
        current.add(kind, entry, grows)
    if any(current.entries.values()):
        yield current.done()


def _tagged(
    applications: Iterable[Entry], metrics: Iterable[Entry], impact: Iterable[Entry]
) -> Iterator[tuple[str, Entry]]:
    for entry in applications:
        yield "a", entry
    for entry in metrics:
        yield "m", entry
    for entry in impact:
        yield "i", entry


def halves(payload: bytes) -> tuple[tuple[bytes, int], tuple[bytes, int]] | None:
    """Split a body in two for an upstream that refused it (too large, or one entry in it
    refused); None for one entry."""
    decoded = json.loads(payload)
    entries = [("a", e) for e in decoded["applications"]] + [("m", e) for e in decoded["metrics"]]
    entries += [
        ("i", {**metric, "samples": [sample]})
        for metric in decoded.get("impactMetrics", ())
        for sample in metric["samples"]
    ]
    if len(entries) < 2:
        return None
    middle = len(entries) // 2
    parts = []
    for part in (entries[:middle], entries[middle:]):
        apps, mets, impact = ([e for kind, e in part if kind == k] for k in "ami")
        parts.append((body(apps, mets, impact), len(part)))
    return parts[0], parts[1]
