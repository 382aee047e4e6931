"""The central service's counts as resources of its application: the metrics store and
its group commit, the fold of the ingest log into the tables the admin API reads, and the
jobs that keep their side tables short. The leader (worker 0) alone folds on a timer and
prunes; every worker folds before it reads (``Folder.caught_up``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from aiohttp import web

from relay.api.jobs import every
from relay.settings import Settings
from relay.store.fold import FOLD_INTERVAL, Folder
from relay.store.metrics import INSTANCES_KEPT, MetricsStore
from relay.store.sql import Database

PRUNE_INTERVAL = 3600.0
"""Seconds between two prunes of what is kept for a while only (idempotency keys,
instances, relays' reports, impact series, the web page's sessions)."""

COMMIT_LINGER = 0.002
"""Seconds a group commit may wait for as many requests as the previous one held: instances
on one PostgreSQL each commit less often for the same load (``GroupCommitter``)."""

Context = Callable[[web.Application], AsyncIterator[None]]


def metrics_store(db: Database, settings: Settings) -> MetricsStore:
    """Counts as the central service keeps them: with their arrival, instances bounded."""
    return MetricsStore(
        db,
        settings.commit_max_requests,
        settings.idempotency_ttl,
        arrived=True,
        instances_kept=INSTANCES_KEPT,
        logged=True,
        linger=COMMIT_LINGER,
    )


def committing(metrics: MetricsStore) -> Context:
    """The group commit runs while the application does; requests in it are committed
    before the database closes."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        metrics.start()
        yield
        await metrics.stop()

    return ctx


def folding(folder: Folder, leader: bool) -> Context:
    """The leader folds the ingest log every ``FOLD_INTERVAL`` (keeping it short); on every
    worker a fold in progress ends before the database closes."""
    periodic = every(FOLD_INTERVAL, folder.fold, "fold") if leader else None

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        job = None if periodic is None else periodic(app)
        if job is not None:
            await anext(job)
        yield
        if job is not None:
            await anext(job, None)
        await folder.stop()

    return ctx


def pruning(metrics: MetricsStore) -> list[Context]:
    """Idempotency keys past their time and instances not seen for long (the leader's)."""
    return [
        every(PRUNE_INTERVAL, metrics.prune_idempotency, "prune"),
        every(PRUNE_INTERVAL, metrics.prune_registrations, "prune-registrations"),
    ]
