"""Reading flag records (any backend) into domain values, and the revision they are at.

Every flag or segment write increments the one row of ``flag_revision`` first thing in
its transaction (``next_revision``): on PostgreSQL that row lock makes the writes of all
instances take turns, so the checks a write makes inside its transaction (does the flag
exist, is the environment enabled in the project) cannot be overtaken by another
instance's write; on SQLite writes take turns anyway.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from relay.core.delta import Change, Changes
from relay.core.flags import (
    Dependency,
    EnvironmentState,
    FlagRecord,
    FlagState,
    SegmentRecord,
    StrategyRecord,
)
from relay.store.sql import Row, Transaction

# a snapshot read while writes keep landing is retried this often, then taken as it is
_CONSISTENT_TRIES = 5

_FLAG_COLUMNS = (
    "name, project_id, type, description, stale, impression_data, created_at, archived_at, revision"
)


class Reads(Protocol):
    """A database or an open transaction: both read with ``fetch_all``."""

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> Sequence[Row]: ...


async def next_revision(tx: Transaction) -> int:
    [row] = await tx.fetch_all(
        "UPDATE flag_revision SET revision = revision + 1 WHERE id = 1 RETURNING revision"
    )
    return int(row[0])


async def current_revision(db: Reads) -> int:
    [row] = await db.fetch_all("SELECT revision FROM flag_revision WHERE id = 1")
    return int(row[0])


async def load_state(db: Reads) -> FlagState:
    return (await load_served(db))[0]


async def load_served(db: Reads) -> tuple[FlagState, Changes]:
    """Every flag and segment, and the change log, as of one revision: read between two
    reads of the revision that agree, so no write landed in between (every write changes
    it)."""
    for _ in range(_CONSISTENT_TRIES):
        before = await current_revision(db)
        flags = await load_flags(db)
        segments = await load_segments(db)
        [floor] = await db.fetch_all("SELECT changes_floor FROM flag_revision WHERE id = 1")
        logged = await db.fetch_all(
            "SELECT max(revision), kind, key, max(project) FROM flag_changes"
            " WHERE revision > ? GROUP BY kind, key",
            (int(floor[0]),),
        )
        if await current_revision(db) == before:
            break
    changes = Changes.of(
        int(floor[0]), before, (Change(int(r[0]), r[1], r[2], _projects(r[3])) for r in logged)
    )
    return FlagState(before, tuple(flags), {s.id: s for s in segments}), changes


async def load_flags(
    db: Reads, where: str = "", params: Sequence[Any] = (), whole: bool = True
) -> list[FlagRecord]:
    """Flags selected by ``where`` (a condition on ``features``), with their environments,
    strategies and dependencies, sorted by name; without ``whole``, their own columns only
    (a listing of names: a flag may hold 256 KB in each environment)."""
    clause = f"WHERE {where}" if where else ""
    names = f"(SELECT name FROM features {clause})"
    rows = await db.fetch_all(
        f"SELECT {_FLAG_COLUMNS} FROM features {clause} ORDER BY name", params
    )
    if not whole:
        return [_flag(row, {}, {}, {}) for row in rows]
    states = await db.fetch_all(
        "SELECT feature_name, environment, enabled, variants FROM feature_environments"
        f" WHERE feature_name IN {names}",
        params,
    )
    related = await db.fetch_all(
        "SELECT child, parent, enabled, variants FROM feature_dependencies"
        f" WHERE child IN {names} OR parent IN {names} ORDER BY child",
        [*params, *params],
    )
    strategies = await db.fetch_all(
        "SELECT id, feature_name, environment, name, title, disabled, sort_order, constraints,"
        f" parameters, variants FROM feature_strategies WHERE feature_name IN {names}",
        params,
    )
    links = await db.fetch_all(
        "SELECT l.strategy_id, l.segment_id FROM feature_strategy_segments l"
        " JOIN feature_strategies s ON s.id = l.strategy_id"
        f" WHERE s.feature_name IN {names} ORDER BY l.segment_id",
        params,
    )
    segments_of: dict[str, list[int]] = {}
    for link in links:
        segments_of.setdefault(link[0], []).append(int(link[1]))
    by_env: dict[tuple[str, str], list[StrategyRecord]] = {}
    for row in strategies:
        key = (row["feature_name"], row["environment"])
        by_env.setdefault(key, []).append(_strategy(row, segments_of.get(row["id"], [])))
    environments: dict[str, dict[str, EnvironmentState]] = {}
    for row in states:
        key = (row["feature_name"], row["environment"])
        ordered = tuple(sorted(by_env.get(key, []), key=StrategyRecord.order))
        environments.setdefault(key[0], {})[key[1]] = EnvironmentState(
            bool(row["enabled"]), ordered, tuple(json.loads(row["variants"]))
        )
    parents: dict[str, tuple[Dependency, ...]] = {}
    children: dict[str, list[str]] = {}
    for row in related:
        variants = tuple(json.loads(row["variants"]))
        dependency = Dependency(row["parent"], bool(row["enabled"]), variants)
        parents[row["child"]] = (dependency,)
        children.setdefault(row["parent"], []).append(row["child"])
    return [_flag(row, environments.get(row["name"], {}), parents, children) for row in rows]


async def load_flag(db: Reads, name: str) -> FlagRecord | None:
    """The flag of that name, whole, or None."""
    found = await load_flags(db, "name = ?", (name,))
    return found[0] if found else None


async def load_segments(
    db: Reads, where: str = "", params: Sequence[Any] = ()
) -> list[SegmentRecord]:
    clause = f"WHERE {where}" if where else ""
    rows = await db.fetch_all(
        "SELECT id, name, description, project_id, constraints, created_at, revision"
        f" FROM segments {clause} ORDER BY id",
        params,
    )
    return [
        SegmentRecord(
            id=int(row["id"]),
            name=row["name"],
            description=row["description"],
            project=row["project_id"],
            constraints=tuple(json.loads(row["constraints"])),
            created_at=row["created_at"],
            revision=int(row["revision"]),
        )
        for row in rows
    ]


def _projects(project: str | None) -> tuple[str, ...]:
    return () if project is None else (project,)


def _flag(
    row: Row,
    environments: dict[str, EnvironmentState],
    parents: dict[str, tuple[Dependency, ...]],
    children: dict[str, list[str]],
) -> FlagRecord:
    return FlagRecord(
        name=row["name"],
        project=row["project_id"],
        type=row["type"],
        description=row["description"],
        stale=bool(row["stale"]),
        impression_data=bool(row["impression_data"]),
        created_at=row["created_at"],
        archived_at=row["archived_at"],
        revision=int(row["revision"]),
        environments=environments,
        dependencies=parents.get(row["name"], ()),
        children=tuple(children.get(row["name"], ())),
    )


def _strategy(row: Row, segments: list[int]) -> StrategyRecord:
    return StrategyRecord(
        id=row["id"],
        name=row["name"],
        title=row["title"],
        disabled=bool(row["disabled"]),
        sort_order=int(row["sort_order"]),
        constraints=tuple(json.loads(row["constraints"])),
        parameters=json.loads(row["parameters"]),
        variants=tuple(json.loads(row["variants"])),
        segments=tuple(segments),
    )
