"""A flag's strategies in one environment: list, read, add, replace (PUT), patch (JSON
Patch), delete, reorder (``set-sort-order``). Bodies are ``relay.wire.strategies.Strategy``,
the same model as a project environment's default strategy.

An environment that is not enabled in the flag's project refuses changes, as in Unleash.
A change that leaves no strategy that is not disabled turns the flag off there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from relay.central.flags.flags import strategy_out
from relay.central.flags.writes import FlagWrite, Writer
from relay.core import jsonpatch
from relay.core.audit import Actor, EventType
from relay.core.errors import InvalidInput, NotFound
from relay.core.flags import FlagRecord, StrategyRecord
from relay.wire.flags import PatchOperation
from relay.wire.strategies import Strategy, StrategyOut, StrategySortOrder


class StrategyService:
    def __init__(self, writer: Writer) -> None:
        self._write = writer
        self._db = writer.db

    async def of_environment(self, project: str, flag: str, environment: str) -> list[StrategyOut]:
        record = await self._read(project, flag, environment)
        return [strategy_out(flag, s) for s in record.environment(environment).strategies]

    async def get(self, project: str, flag: str, environment: str, id: str) -> StrategyOut:
        record = await self._read(project, flag, environment)
        return strategy_out(flag, _find(record, environment, id))

    async def add(
        self, actor: Actor, project: str, flag: str, environment: str, body: Strategy
    ) -> StrategyOut:
        async with self._write(actor) as w:
            record = await _writable(w, project, flag, environment)
            strategy_id = await w.add_strategy(record, environment, body)
            added = await _saved(w, project, flag, environment, strategy_id)
            await _event(w, EventType.FEATURE_STRATEGY_ADD, project, environment, None, added)
            return added

    async def replace(
        self, actor: Actor, project: str, flag: str, environment: str, id: str, body: Strategy
    ) -> StrategyOut:
        return await self._replace(actor, (project, flag, environment, id), lambda _: body)

    async def patch(
        self,
        actor: Actor,
        project: str,
        flag: str,
        environment: str,
        id: str,
        operations: Sequence[PatchOperation],
    ) -> StrategyOut:
        """A JSON Patch of the strategy as GET shows it; the result is read as a PUT body
        (``id`` and ``featureName`` cannot change)."""

        def patched(current: StrategyRecord) -> Strategy:
            document = strategy_out(flag, current).model_dump(mode="json", exclude_none=True)
            identity = {"id": id, "featureName": flag}
            document = {k: v for k, v in document.items() if k not in identity}
            if any(op.path.split("/")[1:2] in (["id"], ["featureName"]) for op in operations):
                raise InvalidInput("A strategy's id and featureName cannot be changed")
            return jsonpatch.patched(Strategy, document, operations)

        return await self._replace(actor, (project, flag, environment, id), patched)

    async def _replace(
        self,
        actor: Actor,
        at: tuple[str, str, str, str],
        body: Callable[[StrategyRecord], Strategy],
    ) -> StrategyOut:
        """The strategy ``at`` (project, flag, environment, id) replaced by what ``body``
        makes of it: the change logged, the flag off there unless still served."""
        project, flag, environment, id = at
        async with self._write(actor) as w:
            record = await _writable(w, project, flag, environment)
            current = _find(record, environment, id)
            await w.replace_strategy(record, environment, current, body(current))
            after = await _saved(w, project, flag, environment, current.id)
            before = strategy_out(flag, current)
            await _event(w, EventType.FEATURE_STRATEGY_UPDATE, project, environment, before, after)
            await w.off_unless_served(record, environment)
            return after

    async def set_sort_order(
        self,
        actor: Actor,
        project: str,
        flag: str,
        environment: str,
        orders: Sequence[StrategySortOrder],
    ) -> None:
        """Unleash's ``set-sort-order``: each named strategy gets its sort order, in one
        write; one that is not the flag's in this environment is a 400 and nothing moves,
        as Unleash 8.2 answers."""
        ids = [entry.id for entry in orders]
        if len(set(ids)) != len(ids):
            raise InvalidInput("A strategy may be named once", "/body")
        async with self._write(actor) as w:
            record = await _writable(w, project, flag, environment)
            before = [s.id for s in record.environment(environment).strategies]
            held = {s.id for s in record.environment(environment).strategies}
            for entry in orders:
                if entry.id not in held:
                    raise InvalidInput(
                        f"trying to change strategies for environment via update sortOrder:"
                        f" {environment} of {flag} has no strategy {entry.id}"
                    )
                await w.records.set_sort_order(w.tx, entry.id, entry.sortOrder)
            after = [
                s.id for s in (await w.flag(project, flag)).environment(environment).strategies
            ]
            await w.event(
                EventType.STRATEGY_ORDER_CHANGED,
                project=project,
                feature=flag,
                environment=environment,
                before={"strategyIds": before},
                after={"strategyIds": after},
            )

    async def delete(
        self, actor: Actor, project: str, flag: str, environment: str, id: str
    ) -> None:
        async with self._write(actor) as w:
            record = await _writable(w, project, flag, environment)
            removed = strategy_out(flag, _find(record, environment, id))
            await w.records.delete_strategy(w.tx, id)
            await _event(w, EventType.FEATURE_STRATEGY_REMOVE, project, environment, removed, None)
            await w.off_unless_served(record, environment)

    async def _read(self, project: str, flag: str, environment: str) -> FlagRecord:
        records = self._write.records
        found = await records.flag(self._db, flag)
        if found is None or found.project != project:
            raise NotFound(f'There\'s no feature named "{flag}" in project "{project}"')
        if await records.project_environment(self._db, project, environment) is None:
            raise NotFound(f"Feature {flag} does not have environment {environment}")
        return found


async def _writable(w: FlagWrite, project: str, flag: str, environment: str) -> FlagRecord:
    record = await w.flag(project, flag)
    if await w.project_environment(project, environment) is None:
        raise InvalidInput("You have not added the current environment to the project")
    await w.touch(flag)
    return record


def _find(flag: FlagRecord, environment: str, id: str) -> StrategyRecord:
    for strategy in flag.environment(environment).strategies:
        if strategy.id == id:
            return strategy
    raise NotFound(f"Could not find strategy with id {id}")


async def _event(
    w: FlagWrite,
    type: EventType,
    project: str,
    environment: str,
    before: StrategyOut | None,
    after: StrategyOut | None,
) -> None:
    """A strategy's event, with the strategy before and after as the admin API shows it."""
    strategy = after or before
    assert strategy is not None
    await w.event(
        type,
        project=project,
        feature=strategy.featureName,
        environment=environment,
        before=None if before is None else before.model_dump(mode="json", exclude_none=True),
        after=None if after is None else after.model_dump(mode="json", exclude_none=True),
    )


async def _saved(w: FlagWrite, project: str, flag: str, environment: str, id: str) -> StrategyOut:
    record = await w.flag(project, flag)
    return strategy_out(flag, _find(record, environment, id))
