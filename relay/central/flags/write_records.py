"""What every flag write reads and writes (``WriteStorage`` of ``writes``), in the SQL both
backends speak: the revision and the change log, the flag and its project environment, a
flag environment's state and its strategies with their segment links."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from relay.central.flags.records import Reads, load_flag, next_revision
from relay.core.delta import FLAG, SEGMENT
from relay.core.flags import FlagRecord, StrategyRecord
from relay.store.sql import Transaction


@dataclass(frozen=True, slots=True)
class ProjectEnvironment:
    """An environment enabled in a project."""

    default_strategy: str | None
    """The strategy a flag turned on there gets when it has none (its JSON), if one is set."""


class WriteRecords:
    async def next_revision(self, tx: Transaction) -> int:
        return await next_revision(tx)

    async def log_changes(
        self, tx: Transaction, revision: int, deleted: Sequence[tuple[int, str | None]], kept: int
    ) -> None:
        await tx.execute(
            "INSERT INTO flag_changes (revision, kind, key, project)"
            f" SELECT ?, '{FLAG}', name, project_id FROM features WHERE revision = ?",
            (revision, revision),
        )
        await tx.execute(
            "INSERT INTO flag_changes (revision, kind, key, project)"
            f" SELECT ?, '{SEGMENT}', CAST(id AS TEXT), project_id FROM segments"
            " WHERE revision = ?",
            (revision, revision),
        )
        for id, project in deleted:
            await tx.execute(
                "INSERT INTO flag_changes (revision, kind, key, project) VALUES (?, ?, ?, ?)",
                (revision, SEGMENT, str(id), project),
            )
        floor = revision - kept
        if floor > 0:
            await tx.execute("DELETE FROM flag_changes WHERE revision <= ?", (floor,))
            await tx.execute(
                "UPDATE flag_revision SET changes_floor = ? WHERE id = 1 AND changes_floor < ?",
                (floor, floor),
            )

    async def project_exists(self, db: Reads, project: str) -> bool:
        return bool(await db.fetch_all("SELECT 1 FROM projects WHERE id = ?", (project,)))

    async def flag(self, db: Reads, name: str) -> FlagRecord | None:
        return await load_flag(db, name)

    async def project_environment(
        self, db: Reads, project: str, environment: str
    ) -> ProjectEnvironment | None:
        rows = await db.fetch_all(
            "SELECT default_strategy FROM project_environments"
            " WHERE project_id = ? AND environment = ?",
            (project, environment),
        )
        return ProjectEnvironment(rows[0][0]) if rows else None

    async def touch(self, tx: Transaction, name: str, revision: int) -> None:
        await tx.execute("UPDATE features SET revision = ? WHERE name = ?", (revision, name))

    async def set_enabled(
        self, tx: Transaction, name: str, environment: str, enabled: bool
    ) -> None:
        await _set_environment(tx, name, environment, "enabled", int(enabled))

    async def set_variants(
        self, tx: Transaction, name: str, environment: str, variants: str
    ) -> None:
        await _set_environment(tx, name, environment, "variants", variants)

    async def last_sort_order(self, db: Reads, name: str, environment: str) -> int | None:
        [row] = await db.fetch_all(
            "SELECT max(sort_order) FROM feature_strategies"
            " WHERE feature_name = ? AND environment = ?",
            (name, environment),
        )
        return None if row[0] is None else int(row[0])

    async def add_strategy(
        self, tx: Transaction, name: str, environment: str, strategy: StrategyRecord
    ) -> None:
        await tx.execute(
            "INSERT INTO feature_environments (feature_name, environment) VALUES (?, ?)"
            " ON CONFLICT (feature_name, environment) DO NOTHING",
            (name, environment),
        )
        await tx.execute(
            "INSERT INTO feature_strategies (id, feature_name, environment, name, title,"
            " disabled, sort_order, constraints, parameters, variants, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (strategy.id, name, environment, *_columns(strategy), time.time()),
        )
        await _link_segments(tx, strategy)

    async def replace_strategy(self, tx: Transaction, strategy: StrategyRecord) -> None:
        await tx.execute(
            "UPDATE feature_strategies SET name = ?, title = ?, disabled = ?, sort_order = ?,"
            " constraints = ?, parameters = ?, variants = ? WHERE id = ?",
            (*_columns(strategy), strategy.id),
        )
        await tx.execute(
            "DELETE FROM feature_strategy_segments WHERE strategy_id = ?", (strategy.id,)
        )
        await _link_segments(tx, strategy)

    async def set_sort_order(self, tx: Transaction, id: str, sort_order: int) -> None:
        await tx.execute(
            "UPDATE feature_strategies SET sort_order = ? WHERE id = ?", (sort_order, id)
        )

    async def delete_strategy(self, tx: Transaction, id: str) -> None:
        await tx.execute("DELETE FROM feature_strategies WHERE id = ?", (id,))

    async def serves(self, db: Reads, name: str, environment: str) -> bool:
        served = await db.fetch_all(
            "SELECT 1 FROM feature_strategies"
            " WHERE feature_name = ? AND environment = ? AND disabled = 0",
            (name, environment),
        )
        return bool(served)

    async def turn_off(self, tx: Transaction, name: str, environment: str) -> bool:
        return bool(
            await tx.execute(
                "UPDATE feature_environments SET enabled = 0"
                " WHERE feature_name = ? AND environment = ? AND enabled = 1",
                (name, environment),
            )
        )

    async def segment_constraints(self, db: Reads, ids: Sequence[int]) -> dict[int, str]:
        return {id: str(text) for id, text in (await _of_segments(db, "constraints", ids)).items()}

    async def segment_projects(self, db: Reads, ids: Sequence[int]) -> dict[int, str | None]:
        return await _of_segments(db, "project_id", ids)


async def _set_environment(
    tx: Transaction, name: str, environment: str, column: str, value: object
) -> None:
    """One column of the flag's state in the environment (which it gets if it had none)."""
    await tx.execute(
        f"INSERT INTO feature_environments (feature_name, environment, {column})"
        f" VALUES (?, ?, ?) ON CONFLICT (feature_name, environment)"
        f" DO UPDATE SET {column} = excluded.{column}",
        (name, environment, value),
    )


async def _of_segments(db: Reads, column: str, ids: Sequence[int]) -> dict[int, Any]:
    """``column`` of each segment of ``ids`` that exists."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    rows = await db.fetch_all(f"SELECT id, {column} FROM segments WHERE id IN ({marks})", list(ids))
    return {int(row[0]): row[1] for row in rows}


async def _link_segments(tx: Transaction, strategy: StrategyRecord) -> None:
    for segment in sorted(set(strategy.segments)):
        await tx.execute(
            "INSERT INTO feature_strategy_segments (strategy_id, segment_id) VALUES (?, ?)",
            (strategy.id, segment),
        )


def _columns(strategy: StrategyRecord) -> tuple[object, ...]:
    """name, title, disabled, sort_order, constraints, parameters, variants."""
    return (
        strategy.name,
        strategy.title,
        int(strategy.disabled),
        strategy.sort_order,
        json.dumps(list(strategy.constraints)),
        json.dumps(dict(strategy.parameters)),
        json.dumps(list(strategy.variants)),
    )
