"""Export and import of flags in Unleash 8.2's format (``features-batch``), so a team can
move from Unleash to us and back.

An export is one environment's view of the chosen flags: the flags, their strategies and
state there, their tags and tag types, the segments the strategies name (by id and name)
and their dependencies. It is logged (``features-exported``), as Unleash logs it.

An import does what Unleash's does, in one flag write (``writes.Writer``): every step goes
through the service the admin API uses (``writes.Joined``), with its checks and its events,
and all of it commits or none of it does (then no event either). In order: flags created,
or their metadata updated; environment variants set; missing tag types created; each
flag's tags made the file's; the flags' strategies in the environment replaced by the
file's (segments matched by name); flags turned on or off; dependencies set; then one
``features-imported`` event. Flags archived here are left out (a warning); it refuses
(400) a flag that exists in another project, a name twice, a segment or a parent flag
that does not exist here, items naming flags the file does not list, and an environment
the project does not have. ``validate`` runs the same import and rolls it back, so it
refuses exactly what the import refuses (a dependency the rules forbid too), changing nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pydantic import ValidationError

from relay.central.flags.dependencies import DependencyService, DependencyStorage
from relay.central.flags.exporting import ExportStorage, exported
from relay.central.flags.flags import FlagService, FlagStorage, strategy_out
from relay.central.flags.records import Reads
from relay.central.flags.strategies import StrategyService
from relay.central.flags.tags import TagService, TagStorage
from relay.central.flags.variants import VariantService
from relay.central.flags.writes import FlagWrite, Joined, Stored, Writer
from relay.core.audit import Actor, EventType
from relay.core.errors import DomainError, InvalidInput, NotFound
from relay.core.flags import FlagRecord
from relay.wire import flags as wire
from relay.wire import transfer as t


class TransferStorage(ExportStorage, Protocol):
    """What an export and an import read (``transfer_records.TransferRecords``); a
    project and its environments through the writer's ``WriteStorage``."""

    async def chosen_count(self, db: Reads, query: t.ExportQuery) -> int:
        """How many flags that are not archived ``query`` chooses: those with its tag
        value, else its names, else its project's, else all."""
        ...

    async def chosen(self, db: Reads, query: t.ExportQuery) -> list[FlagRecord]:
        """Those flags, whole, by name."""
        ...

    async def flags_named(self, db: Reads, names: Sequence[str]) -> list[FlagRecord]: ...

    async def active(self, db: Reads, names: Sequence[str]) -> set[str]:
        """Those of ``names`` that are flags, not archived."""
        ...

    async def segments_for(self, db: Reads, project: str) -> list[tuple[int, str]]:
        """(id, name) of the segments a flag of ``project`` may use, by id."""
        ...

    async def tag_type_names(self, db: Reads) -> set[str]: ...


@dataclass(frozen=True, slots=True)
class ImportStorage:
    """The storage of the services an import goes through."""

    flags: FlagStorage
    tags: TagStorage
    dependencies: DependencyStorage


class TransferService(Stored[TransferStorage]):
    def __init__(self, writer: Writer, records: TransferStorage, imports: ImportStorage) -> None:
        super().__init__(writer, records)
        self._imports = imports

    async def export(self, actor: Actor, query: t.ExportQuery) -> t.ExportResult:
        """The flags that are not archived chosen by ``query`` (a tag value, names, a
        project, else all), as Unleash exports them from ``query.environment``. A choice
        past what one import takes (``wire.transfer``'s bounds) is refused (400), so every
        file written is a file taken: a larger project is exported in parts."""
        count = await self._records.chosen_count(self._db, query)
        if count > t.MAX_IMPORT_FLAGS:  # refused before any flag is read whole
            raise _past_import(f"features: {count} flags, at most {t.MAX_IMPORT_FLAGS}")
        flags = await self._records.chosen(self._db, query)
        try:
            result = await exported(self._records, self._db, flags, query.environment)
        except ValidationError as exc:
            said = exc.errors(include_url=False, include_input=False)[0]
            at = ".".join(str(part) for part in said["loc"])
            problem = str(said["msg"]).removeprefix("Value error, ")
            raise _past_import(f"{at}: {problem}" if at else problem) from None
        async with self._db.transaction() as tx:
            await self._write.events.record(
                tx,
                actor,
                EventType.FEATURES_EXPORTED,
                project=query.project,
                environment=query.environment,
                after=result.model_dump(mode="json", exclude_none=True),
            )
        return result

    async def validate(self, actor: Actor, body: t.ImportBody) -> t.ValidationOut:
        """What an import of ``body`` would refuse (errors) and do (warnings): the import
        tried and undone, so the services' own rules (dependencies one level deep, in one
        project...) are answered too, not only the plan's checks."""
        try:
            async with self._write(actor) as w:
                plan = await self._plan(w.tx, body)
                answer = plan.answer
                if not answer.errors:
                    try:
                        await self._import(w, actor, body.project, body.environment, plan)
                    except DomainError as refused:
                        item = t.ValidationItem(message=refused.message, affectedItems=[])
                        answer = answer.model_copy(update={"errors": [item]})
                raise _Undone(answer)
        except _Undone as undone:
            return undone.answer

    async def import_(self, actor: Actor, body: t.ImportBody) -> None:
        """All of ``body`` imported in one transaction, or a 400 and nothing changed."""
        async with self._write(actor) as w:
            plan = await self._plan(w.tx, body)
            errors = plan.answer.errors
            if errors:
                raise InvalidInput(
                    " ".join(f"{e.message} {', '.join(e.affectedItems)}." for e in errors),
                    "/body/data",
                )
            await self._import(w, actor, body.project, body.environment, plan)
            await w.event(
                EventType.FEATURES_IMPORTED, project=body.project, environment=body.environment
            )

    async def _plan(self, db: Reads, body: t.ImportBody) -> _Plan:
        """Unleash's checks of an import (``export-import-service.ts``), in its words."""
        project, environment, data = body.project, body.environment, body.data
        if not await self._write.records.project_exists(db, project):
            raise NotFound(f"Active project with id {project} does not exist")
        names = [f.name for f in data.features]
        found = await self._records.flags_named(db, names)
        archived = {f.name for f in found if f.archived_at is not None}
        listed = set(names) - archived
        data = _without(data, archived)
        errors: list[t.ValidationItem] = []

        def error(message: str, items: Sequence[str]) -> None:
            if items:
                errors.append(t.ValidationItem(message=message, affectedItems=list(items)))

        if await self._write.records.project_environment(db, project, environment) is None:
            error(f"The environment is not enabled in project {project}:", [environment])
        error(
            "You cannot import a features that already exist in other projects. You already"
            f" have the following features defined outside of project {project}:",
            [
                f"{f.name} (in project {f.project})"
                for f in found
                if f.name in listed and f.project != project
            ],
        )
        error(
            "We detected the following features are duplicate in your import data:",
            sorted(name for name, count in Counter(names).items() if count > 1),
        )
        segments, missing = await self._segments(db, project, data)
        error("We detected the following segments that need to be created first:", missing)
        parents = sorted({d.feature for e in data.dependencies for d in e.dependencies} - listed)
        known = await self._records.active(db, parents)
        error(
            "We detected the following dependencies that need to be created first:",
            sorted(set(parents) - known),
        )
        strays = {s.featureName for s in data.featureStrategies}
        strays |= {e.name for e in data.featureEnvironments}
        strays |= {g.featureName for g in data.featureTags}
        strays |= {d.feature for d in data.dependencies}
        error(
            "The following flags are named by strategies, environments, tags or dependencies"
            " but not listed in features:",
            sorted(strays - listed - archived),
        )
        existing = frozenset(f.name for f in found if f.name in listed and f.project == project)
        warnings: list[t.ValidationItem] = []
        for message, items in (
            (
                "The following features will not be imported as they are currently archived."
                " To import them, please unarchive them first:",
                sorted(archived),
            ),
            (
                "The following features already exist in this project and will be overwritten:",
                sorted(existing),
            ),
        ):
            if items:
                warnings.append(t.ValidationItem(message=message, affectedItems=items))
        answer = t.ValidationOut(errors=errors, warnings=warnings)
        return _Plan(answer, data, existing, segments)

    async def _segments(
        self, db: Reads, project: str, data: t.ExportResult
    ) -> tuple[dict[int, int], list[str]]:
        """The file's segment ids mapped to ours by name (a segment of every project, or of
        ``project``), and the names (or ids, when the file does not name them) not found."""
        ours: dict[str, int] = {}
        for id, name in await self._records.segments_for(db, project):
            ours.setdefault(name, id)
        mapped = {s.id: ours[s.name] for s in data.segments if s.name in ours}
        missing = [s.name for s in data.segments if s.name not in ours]
        named = {s.id for s in data.segments}
        used = {i for s in data.featureStrategies for i in s.segments}
        missing += [f"segment {i} (not in segments)" for i in sorted(used - named)]
        return mapped, missing

    async def _import(
        self, w: FlagWrite, actor: Actor, project: str, environment: str, plan: _Plan
    ) -> None:
        """Every step through the service the admin API uses, in ``w`` (``writes.Joined``)."""
        data, joined, stored = plan.data, Joined(w, self._db), self._imports
        flags, strategies = FlagService(joined, stored.flags), StrategyService(joined)
        for feature in data.features:
            if feature.name not in plan.existing:
                created = wire.CreateFlag(
                    name=feature.name,
                    type=feature.type,
                    description=feature.description,
                    impressionData=feature.impressionData,
                )
                await flags.create(actor, project, created)
            if feature.name in plan.existing or feature.stale:
                update = wire.UpdateFlag(
                    description=feature.description,
                    type=feature.type,
                    stale=feature.stale,
                    impressionData=feature.impressionData,
                )
                await flags.update(actor, project, feature.name, update)
        variants = VariantService(joined)
        for state in data.featureEnvironments:
            if state.variants:
                pushed = wire.PushVariants(variants=state.variants, environments=[environment])
                await variants.push(actor, project, state.name, pushed)
        tags = TagService(joined, stored.tags)
        have = await self._records.tag_type_names(w.tx)
        for kind in data.tagTypes:
            if kind.name not in have:
                have.add(kind.name)
                await tags.create_type(actor, wire.TagType.model_validate(kind.model_dump()))
        for feature in data.features:
            wanted = [
                wire.Tag(type=g.tagType, value=g.tagValue)
                for g in data.featureTags
                if g.featureName == feature.name
            ]
            await tags.replace(actor, feature.name, wanted)
        for feature in data.features:
            await _clear(w, project, feature.name, environment)
        for strategy in data.featureStrategies:
            ours = [plan.segments[i] for i in strategy.segments]
            body = strategy.model_copy(update={"segments": ours})
            await strategies.add(actor, project, strategy.featureName, environment, body)
        for state in data.featureEnvironments:
            await flags.set_enabled(actor, project, state.name, environment, state.enabled)
        dependencies = DependencyService(joined, stored.dependencies)
        for entry in data.dependencies:
            for dependency in entry.dependencies:
                await dependencies.add(actor, project, entry.feature, dependency)


class _Undone(Exception):
    """Rolls back a validation's tried import, carrying its answer out."""

    def __init__(self, answer: t.ValidationOut) -> None:
        super().__init__("validation undone")
        self.answer = answer


@dataclass(frozen=True, slots=True)
class _Plan:
    answer: t.ValidationOut
    data: t.ExportResult
    """The file without the flags archived here."""
    existing: frozenset[str]
    """The file's flags this project has already."""
    segments: dict[int, int]
    """The file's segment ids -> ours."""


def _without(data: t.ExportResult, archived: set[str]) -> t.ExportResult:
    """The file without the flags archived here (Unleash's ``removeArchivedFeatures``)."""
    if not archived:
        return data
    tags = [g for g in data.featureTags if g.featureName not in archived]
    return data.model_copy(
        update={
            "features": [f for f in data.features if f.name not in archived],
            "featureEnvironments": [e for e in data.featureEnvironments if e.name not in archived],
            "featureStrategies": [
                s for s in data.featureStrategies if s.featureName not in archived
            ],
            "featureTags": tags,
            "tagTypes": [k for k in data.tagTypes if k.name in {g.tagType for g in tags}],
            "dependencies": [d for d in data.dependencies if d.feature not in archived],
        }
    )


def _past_import(problem: str) -> InvalidInput:
    return InvalidInput(
        f"The export is more than one import takes ({problem});"
        " export fewer flags at a time, by name or by tag"
    )


async def _clear(w: FlagWrite, project: str, name: str, environment: str) -> None:
    """The flag's strategies in ``environment`` removed (Unleash's import deletes them
    before adding the file's), each removal an event."""
    flag = await w.flag(project, name)
    for strategy in flag.environment(environment).strategies:
        await w.records.delete_strategy(w.tx, strategy.id)
        await w.event(
            EventType.FEATURE_STRATEGY_REMOVE,
            project=project,
            feature=name,
            environment=environment,
            before=strategy_out(name, strategy).model_dump(mode="json", exclude_none=True),
        )
