"""A flag's dependency on a parent flag, with Unleash's rules: one parent, in the same
project, not archived; a parent has no parent of its own and a flag others depend on
cannot become a child (no second level, so no cycle); a flag with children cannot be
archived (``flags.FlagService.archive``).

Each change is one flag write (``writes.Writer``) that touches the child: its revision
moves, so the client API, delta and streaming serve the change like any other. Refusals
are Unleash's InvalidOperationError (403), in its words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from relay.central.flags.records import Reads
from relay.central.flags.writes import Stored
from relay.core.audit import Actor, EventType
from relay.core.errors import InvalidOperation, NotFound
from relay.core.flags import Dependency, FlagRecord
from relay.store.sql import Transaction
from relay.wire import flags as wire

MAX_PARENTS = 1_000


class DependencyStorage(Protocol):
    """Dependencies as stored (``dependency_records.DependencyRecords``); ``db``: where a
    read looks, ``tx``: the write a change is made in."""

    async def flag(self, db: Reads, name: str) -> FlagRecord | None:
        """The flag with its dependency and the names of its children."""
        ...

    async def set_parent(
        self, tx: Transaction, child: str, parent: str, enabled: bool, variants: Sequence[str]
    ) -> None:
        """The child's one dependency becomes this one."""
        ...

    async def remove(self, tx: Transaction, child: str, parent: str | None) -> bool:
        """The child's dependency (on ``parent``, or any); False when it had none."""
        ...

    async def possible_parents(self, db: Reads, project: str, child: str, most: int) -> list[str]:
        """The first ``most`` flags of the project, by name, other than ``child``, neither
        archived nor with a parent; none when ``child`` is not a flag of the project."""
        ...

    async def any(self, db: Reads) -> bool:
        """Whether any flag depends on another."""
        ...


class DependencyService(Stored[DependencyStorage]):
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
            found = await self._records.flag(w.tx, parent)
            if found is not None and found.dependencies:
                raise InvalidOperation(
                    "Transitive dependency detected. Cannot add a dependency to the feature"
                    " that has parent dependency."
                )
            if found is None or found.archived_at is not None:
                raise InvalidOperation(f"No active feature {parent} exists")
            if found.project != project:
                raise InvalidOperation("Parent and child features should be in the same project")
            variants = (body.variants or []) if body.enabled else []
            before = _shown(flag.dependencies)
            await self._records.set_parent(w.tx, child, parent, body.enabled, variants)
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
        remove is a 404, as Unleash 8.2 answers (measured:
        tests/e2e/test_admin_statuses_unleash.py)."""
        async with self._write(actor) as w:
            flag = await w.flag(project, child, writable=False)
            if not await self._records.remove(w.tx, child, parent):
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
        return await self._records.possible_parents(self._db, project, child, MAX_PARENTS)

    async def parent_variants(self, project: str, parent: str) -> list[str]:
        """The variant names a dependency on ``parent`` may name: those of its strategies
        and its own, in every environment, sorted and once each (none for a flag that is
        not there, as Unleash answers)."""
        found = await self._records.flag(self._db, parent)
        if found is None or found.project != project:
            return []
        names = {
            str(variant["name"])
            for state in found.environments.values()
            for variants in (state.variants, *(s.variants for s in state.strategies))
            for variant in variants
        }
        return sorted(names)

    async def any(self) -> bool:
        """Whether any flag depends on another (Unleash's check, for the whole instance)."""
        return await self._records.any(self._db)


def _shown(dependencies: Sequence[Dependency]) -> dict[str, Any] | None:
    """A flag's dependency as the event log keeps it (Unleash's shape), None without."""
    for dependency in dependencies:
        shown = {"feature": dependency.parent, "enabled": dependency.enabled}
        return {**shown, "variants": list(dependency.variants)}
    return None
