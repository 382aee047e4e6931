"""Bar charts drawn on the server as SVG: they need no script, no CDN and no build step,
work offline and without JavaScript, and a table under each says the same for screen
readers. This module only computes the geometry; the ``chart`` macro of
``templates/macros.html`` draws it.

One bar per hour of the period (empty hours stay empty), its series stacked: yes on no,
or one variant on another.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

WIDTH, HEIGHT = 720.0, 220.0
LEFT, RIGHT, TOP, BOTTOM = 48.0, 8.0, 10.0, 26.0
"""The drawing's box (SVG units; the picture scales to its container) and its margins."""
MAX_TICKS = 8


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str
    """The CSS class that colours it: ``yes``, ``no``, ``v0``..``v7``."""
    label: str
    """What a pointer hovering it is told (SVG ``title``)."""


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]
    """Labels under the bars: (x, text)."""
    top: int
    """The largest stack: the value of the top of the drawing."""
    legend: tuple[tuple[str, str], ...]
    """(kind, series name) in stacking order."""
    width: float = WIDTH
    height: float = HEIGHT
    left: float = LEFT
    base: float = HEIGHT - BOTTOM


def stacked(
    title: str, hours: Sequence[datetime], series: Sequence[tuple[str, str, Sequence[int]]]
) -> Chart:
    """``series``: (kind, name, one value per hour), stacked in that order from the bottom."""
    totals = [sum(values[i] for _, _, values in series) for i in range(len(hours))]
    top = max(totals, default=0)
    plot_width = WIDTH - LEFT - RIGHT
    plot_height = HEIGHT - TOP - BOTTOM
    slot = plot_width / max(1, len(hours))
    gap = min(2.0, slot * 0.2)
    bars = []
    for i, hour in enumerate(hours):
        base = HEIGHT - BOTTOM
        for kind, name, values in series:
            value = values[i]
            if not value:
                continue
            height = plot_height * value / top
            base -= height
            when = hour.strftime("%Y-%m-%d %H:00 UTC")
            bars.append(
                Bar(
                    LEFT + i * slot + gap / 2,
                    base,
                    slot - gap,
                    height,
                    kind,
                    f"{when}: {value} {name}",
                )
            )
    every = max(1, -(-len(hours) // MAX_TICKS))
    ticks = tuple(
        (LEFT + (i + 0.5) * slot, _tick(hours[i], len(hours))) for i in range(0, len(hours), every)
    )
    legend = tuple((kind, name) for kind, name, _ in series)
    return Chart(title, tuple(bars), ticks, top, legend)


def _tick(hour: datetime, count: int) -> str:
    return hour.strftime("%H:00") if count <= 48 else hour.strftime("%d %b")
