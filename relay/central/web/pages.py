"""The web page's pages (GET): flags, a flag's strategies and usage, applications,
connected relays, unknown flags, keys. Each reads through the services the admin API uses
(``FlagService``, ``UsageReader``, ``KeyService``, the relays' reports), never the database
itself."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web
from pydantic import TypeAdapter

from relay.api.errors import NotFoundError
from relay.api.paging import CursorName, next_url, position, whole
from relay.central.edges import after as relay_after
from relay.central.edges import connected, place
from relay.central.state import EDGES, FLAGS, KEYS, PROJECTS, USAGE
from relay.central.web.chart import Chart, stacked
from relay.central.web.flag_links import links
from relay.central.web.site import page, render
from relay.central.web.strategy_pages import configuration
from relay.core.errors import NotFound
from relay.core.ingest_batch import from_epoch, hour_start
from relay.wire.admin import ApplicationInstance, RawMetric
from relay.wire.common import MAX_NAME, KeyType

PERIODS = {"1h": 1, "24h": 24, "48h": 48, "7d": 24 * 7}
DEFAULT_PERIOD = "24h"
MAX_ROWS = 10_000
"""Rows of counts one usage page reads (the period's, in pages of the raw read)."""
MAX_VARIANTS = 8
"""Variants drawn apart in a chart; the others are summed as "other"."""
FLAGS_PAGE, MAX_FLAGS_PAGE = 100, 1_000
INSTANCES_PAGE = MAX_INSTANCES_PAGE = 200
"""Instances on one applications page, whatever ``limit`` asks: each may carry 100 relays' names
of its path, read and checked (1,000 such took 0.9 s of the event loop)."""
HOPS_SHOWN = 5
"""Relays of an instance's path named on the applications page (a key may send 100 made-up
ones an instance: named all, a page of 1,000 instances was 67 MB built on the event loop)."""
RELAYS_PAGE, MAX_RELAYS_PAGE = 100, 1_000
SCANNED_INSTANCES, RELAYED_INSTANCES = 10_000, 200
UNREPORTED_SHOWN, APPS_SHOWN = 100, 10
"""Relays known only from ``connectVia`` listed (those of the most recently seen instances),
and the applications named for each: what one key's made-up hops can put on the page."""

FLAG_PLACE = TypeAdapter(tuple[CursorName, CursorName])  # the last flag shown: project, name
# the last instance: app, environment, instance
_PLACE = TypeAdapter(tuple[CursorName, CursorName, CursorName])


@page
async def flags(request: web.Request) -> web.Response:
    """Flags by project and name, ``FLAGS_PAGE`` a page (``next`` links the following),
    each environment's state and usage; ``q`` filters by name. Usage is read for the
    page's flags only: its cost is theirs, however many names have counts."""
    query = request.query.get("q", "").strip()[:MAX_NAME]
    limit = whole(request.query.get("limit"), "limit", MAX_FLAGS_PAGE, FLAGS_PAGE)
    after = position(request.query["after"], FLAG_PLACE) if "after" in request.query else None
    found = await request.app[FLAGS].page(after, limit + 1, query)
    shown, more = found[:limit], len(found) > limit
    now = datetime.now(UTC)
    usage = await request.app[USAGE].summary([f.name for f in shown], now)
    names = dict(await request.app[PROJECTS].all())
    projects: dict[str, tuple[str, str, list[str], list[Any]]] = {}
    for flag in shown:
        environments = [e.name for e in flag.environments]
        entry = projects.setdefault(
            flag.project, (flag.project, names.get(flag.project, ""), environments, [])
        )
        seen = [usage[(flag.name, e)] for e in environments if (flag.name, e) in usage]
        last = max((u.last_seen for u in seen if u.last_seen), default=None)
        entry[3].append((flag, {e.name: e.enabled for e in flag.environments}, last))
    following = next_url(request, limit, [shown[-1].project, shown[-1].name]) if more else None
    return render(
        request,
        "flags.html",
        projects=list(projects.values()),
        usage=usage,
        windows=[from_epoch(hour_start(now - timedelta(hours=h))) for h in (1, 24)],
        query=query,
        first=after is None,
        next=following,
    )


@dataclass
class Selection:
    """What a usage page shows: the rows of the chosen environment and application."""

    rows: list[RawMetric]
    yes: int = 0
    no: int = 0
    by_place: dict[tuple[str, str], list[int]] = field(default_factory=dict)


@page
async def flag(request: web.Request) -> web.Response:
    """A flag's exposure: yes/no per hour over a period, per environment and application,
    variants stacked when there are any; totals and every row under the charts. Names that
    no flag has (unknown flags) have their counts shown all the same."""
    name = request.match_info["name"]
    if len(name) > MAX_NAME or "\x00" in name:
        raise NotFoundError("No such flag")
    period = request.query.get("period", DEFAULT_PERIOD)
    if period not in PERIODS:
        period = DEFAULT_PERIOD
    environment = request.query.get("environment", "")
    app_name = request.query.get("app", "")
    try:
        project = await request.app[FLAGS].project_of(name)
        record = await request.app[FLAGS].get(project, name)
    except NotFound:
        record = None
    now = datetime.now(UTC)
    since = hour_start(now - timedelta(hours=PERIODS[period] - 1))
    rows = await _rows(request, name, since)
    environments = sorted({r.environment for r in rows} | _environments_of(record))
    apps = sorted({r.appName for r in rows})
    chosen = [
        r
        for r in rows
        if (not environment or r.environment == environment)
        and (not app_name or r.appName == app_name)
    ]
    hours = [from_epoch(h) for h in range(since, hour_start(now) + 1, 3600)]
    charts, selection = _charts(name, hours, chosen)
    shown = (
        {**await configuration(request, record), **await links(request, record)} if record else {}
    )
    return render(
        request,
        "flag.html",
        **shown,
        name=name,
        flag=record,
        period=period,
        periods=list(PERIODS),
        environment=environment,
        environments=environments,
        app=app_name,
        apps=apps,
        charts=charts,
        selection=selection,
        truncated=len(rows) >= MAX_ROWS,
    )


def _environments_of(record: object) -> set[str]:
    return {e.name for e in getattr(record, "environments", [])}


async def _rows(request: web.Request, name: str, since: int) -> list[RawMetric]:
    rows: list[RawMetric] = []
    after = None
    while len(rows) < MAX_ROWS:
        page_rows = await request.app[USAGE].raw_metrics(name, since, after, 1000)
        rows += page_rows
        if len(page_rows) < 1000:
            break
        last = page_rows[-1]
        after = (last.appName, last.environment, int(last.timestamp.timestamp()))
    return rows[:MAX_ROWS]


def _charts(
    name: str, hours: list[datetime], rows: list[RawMetric]
) -> tuple[list[Chart], Selection]:
    index = {hour: i for i, hour in enumerate(hours)}
    yes, no = [0] * len(hours), [0] * len(hours)
    variants: dict[str, list[int]] = defaultdict(lambda: [0] * len(hours))
    selection = Selection(
        sorted(rows, key=lambda r: (r.timestamp, r.environment, r.appName), reverse=True)
    )
    for row in rows:
        i = index.get(row.timestamp)
        place = selection.by_place.setdefault((row.environment, row.appName), [0, 0])
        place[0] += row.yes
        place[1] += row.no
        selection.yes += row.yes
        selection.no += row.no
        if i is None:
            continue
        yes[i] += row.yes
        no[i] += row.no
        for variant, count in row.variants.items():
            variants[variant][i] += count
    charts = [
        stacked(
            f"Exposure of {name}: yes and no per hour",
            hours,
            [("yes", "yes", yes), ("no", "no", no)],
        )
    ]
    if variants:
        ranked = sorted(variants, key=lambda v: (-sum(variants[v]), v))
        series = [(f"v{n}", v, variants[v]) for n, v in enumerate(ranked[:MAX_VARIANTS])]
        if len(ranked) > MAX_VARIANTS:
            other = [sum(variants[v][i] for v in ranked[MAX_VARIANTS:]) for i in range(len(hours))]
            series.append((f"v{MAX_VARIANTS}", "other", other))
        charts.append(stacked(f"Variants of {name} per hour", hours, series))
    return charts, selection


@page
async def applications(request: web.Request) -> web.Response:
    """Registered instances by application, ``INSTANCES_PAGE`` a page (``next`` links the
    following): environment, SDK, last seen, and the path each came through (SDK, then
    the relays of its ``connectVia``, then here)."""
    limit = whole(request.query.get("limit"), "limit", MAX_INSTANCES_PAGE, INSTANCES_PAGE)
    after = position(request.query["after"], _PLACE) if "after" in request.query else None
    found = await request.app[USAGE].instances(None, after, limit + 1)
    shown, more = found[:limit], len(found) > limit
    apps: list[tuple[str, list[ApplicationInstance]]] = []
    for row in shown:
        if not apps or apps[-1][0] != row.app_name:
            apps.append((row.app_name, []))
        apps[-1][1].append(row.instance)
    following = next_url(request, limit, list(shown[-1].place)) if more else None
    arrived = await request.app[USAGE].counts_arrived([name for name, _ in apps])
    return render(
        request,
        "applications.html",
        apps=apps,
        arrived={
            app: [(env, from_epoch(at)) for env, at in found] for app, found in arrived.items()
        },
        first=after is None,
        next=following,
        hops_shown=HOPS_SHOWN,
    )


@page
async def relays(request: web.Request) -> web.Response:
    """Relays that reported (their latest report), ``RELAYS_PAGE`` a page by scope and
    identifier; and relays seen only in ``connectVia``, of up to ``RELAYED_INSTANCES`` among the
    ``SCANNED_INSTANCES`` most recently seen instances (older relays, or an upstream that
    is a relay refusing reports)."""
    limit = whole(request.query.get("limit"), "limit", MAX_RELAYS_PAGE, RELAYS_PAGE)
    after = relay_after(request.query)
    found = await connected(request.app[EDGES], after=after, limit=limit + 1)
    reported, more = found[:limit], len(found) > limit
    following = next_url(request, limit, place(reported[-1])) if more else None
    return render(
        request,
        "relays.html",
        reported=reported,
        unreported=await _unreported(request) if after is None else [],
        now=datetime.now(UTC),
        next=following,
    )


async def _unreported(request: web.Request) -> list[tuple[tuple[str, str], list[str], int]]:
    """Up to ``UNREPORTED_SHOWN`` relays seen in recent instances' ``connectVia`` that have
    no report, each with up to ``APPS_SHOWN`` applications it serves and how many more."""
    via: dict[tuple[str, str], set[str]] = defaultdict(set)
    for app_name, hops in await request.app[USAGE].relayed(SCANNED_INSTANCES, RELAYED_INSTANCES):
        for hop in hops:
            via[hop].add(app_name)
    known = await request.app[EDGES].known([hop[1] for hop in via])
    unknown = sorted([hop for hop in via if hop[1] not in known][:UNREPORTED_SHOWN])
    return [
        (hop, sorted(via[hop])[:APPS_SHOWN], max(0, len(via[hop]) - APPS_SHOWN)) for hop in unknown
    ]


@page
async def unknown(request: web.Request) -> web.Response:
    return render(request, "unknown.html", flags=await request.app[USAGE].unknown_flags())


async def keys_page(request: web.Request, status: int = 200, error: str = "") -> web.Response:
    """The keys, and the form to make one (also the answer to a form with a mistake)."""
    return render(
        request,
        "keys.html",
        status,
        keys=await request.app[KEYS].listed(),
        types=[t.value for t in KeyType],
        environments=await request.app[PROJECTS].environment_names(),
        projects=await request.app[PROJECTS].all(),
        error=error,
        now=datetime.now(UTC),
    )


@page
async def keys(request: web.Request) -> web.Response:
    return await keys_page(request)
