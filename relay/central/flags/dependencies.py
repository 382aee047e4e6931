"""A flag's dependency on a parent flag, with Unleash's rules: one parent, in the same
project, not archived; a parent has no parent of its own and a flag others depend on
cannot become a child (no second level, so no cycle); a flag with children cannot be
archived (``flags.FlagService.archive``).

Each change is one flag write (``writes.Writer``) that touches the child: its revision
moves, so the client API, delta and streaming serve the change like any other. Refusals
are Unleash's InvalidOperationError (403), in its words.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from relay.central.flags.records import load_flags
from relay.central.flags.writes import Writer
from relay.core.audit import Actor, EventType
from relay.core.errors import InvalidOperation, NotFound
from relay.core.flags import Dependency
from relay.wire import flags as wire

MAX_PARENTS = 1_000


class DependencyService:
    def __init__(self, writer: Writer) -> None:
        self._write = writer
        self._db = writer.db

    async def add(
        self, actor: Actor, project: str, child: str, body: wire.CreateDependency
    ) -> None:
        """Sets the child's parent, replacing any it had (Unleash keeps one). ``variants``
        are kept only when the parent must be enabled."""
        parent = body.feature
        async with self._write(actor) as w:
            flag = await w.flag(project, child)
            if parent == child:
                raise InvalidOperation("A feature flag cannot depend on itself.")
            if flag.children:
                raise InvalidOperation(
                    "Transitive dependency detected. Cannot add a dependency to the feature"
                    " that other features depend on."
                )
            found = await load_flags(w.tx, "name = ?", (parent,))
            if found and found[0].dependencies:
                raise InvalidOperation(
                    "Transitive dependency detected. Cannot add a dependency to the feature"
                    " that has parent dependency."
                )
            if not found or found[0].archived_at is not None:
                raise InvalidOperation(f"No active feature {parent} exists")
            if found[0].project != project:
                raise InvalidOperation("Parent and child features should be in the same project")
            variants = (body.variants or []) if body.enabled else []
            before = _shown(flag.dependencies)
            await w.tx.execute("DELETE FROM feature_dependencies WHERE child = ?", (child,))
            await w.tx.execute(
                "INSERT INTO feature_dependencies (child, parent, enabled, variants)"
                " VALUES (?, ?, ?, ?)",
                (child, parent, int(body.enabled), json.dumps(variants)),
            )
            await w.touch(child)
            after = {"feature": parent, "enabled": body.enabled, "variants": variants}
            await w.event(
                EventType.FEATURE_DEPENDENCY_ADDED,
                project=project,
                feature=child,
                before=before,
                after=after,
            )

    async def delete(
        self, actor: Actor, project: str, child: str, parent: str | None = None
    ) -> None:
        """Removes the child's dependency (on ``parent``, or whichever it has); none to
        remove is a 404, as Unleash 8.2 answers (measured: tests/test_admin_statuses_unleash.py)."""
        async with self._write(actor) as w:
            flag = await w.flag(project, child, writable=False)
            sql, params = "DELETE FROM feature_dependencies WHERE child = ?", [child]
            if parent is not None:
                sql, params = f"{sql} AND parent = ?", [child, parent]
            if not await w.tx.execute(sql, params):
                raise NotFound(
                    f'Feature "{child}" has no dependencies to remove in project "{project}".'
                    if parent is None
                    else f'No dependency on "{parent}" for feature "{child}" in project'
                    f' "{project}".'
                )
            await w.touch(child)
            await w.event(
                EventType.FEATURE_DEPENDENCY_REMOVED,
                project=project,
                feature=child,
                before=_shown(flag.dependencies),
            )

    async def possible_parents(self, project: str, child: str) -> list[str]:
        """The flags ``child`` may depend on: the project's other flags that are not
        archived and have no parent, by name (an unknown child has none), the first
        ``MAX_PARENTS`` of them: what one page or answer lists stays bounded however large
        the project (a parent past them is still accepted by name)."""
        rows = await self._db.fetch_all(
            "SELECT f.name FROM features f"
            " LEFT JOIN feature_dependencies d ON d.child = f.name"
            " WHERE f.project_id = ? AND f.name <> ? AND d.child IS NULL"
            " AND f.archived_at IS NULL"
            " AND EXISTS (SELECT 1 FROM features c WHERE c.name = ? AND c.project_id = ?)"
            " ORDER BY f.name LIMIT ?",
            (project, child, child, project, MAX_PARENTS),
        )
        return [str(row[0]) for row in rows]

    async def parent_variants(self, project: str, parent: str) -> list[str]:
        """The variant names a dependency on ``parent`` may name: those of its strategies
        and its own, in every environment, sorted and once each (none for a flag that is
        not there, as Unleash answers)."""
        found = await load_flags(self._db, "name = ? AND project_id = ?", (parent, project))
        if not found:
            return []
        names = {
            str(variant["name"])
            for state in found[0].environments.values()
            for variants in (state.variants, *(s.variants for s in state.strategies))
            for variant in variants
        }
        return sorted(names)

    async def any(self) -> bool:
        """Whether any flag depends on another (Unleash's check, for the whole instance)."""
        return bool(await self._db.fetch_all("SELECT 1 FROM feature_dependencies LIMIT 1"))


def _shown(dependencies: Sequence[Dependency]) -> dict[str, Any] | None:
    """A flag's dependency as the event log keeps it (Unleash's shape), None without."""
    for dependency in dependencies:
        shown = {"feature": dependency.parent, "enabled": dependency.enabled}
        return {**shown, "variants": list(dependency.variants)}
    return None
