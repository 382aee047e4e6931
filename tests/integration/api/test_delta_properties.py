"""The delta protocol's promise, as a property: any sequence of admin changes (flags created,
turned on and off, strategies with segments added and deleted, flags archived and revived,
segments created, changed and deleted, an environment removed from the project and added
back, dependencies added and removed, a flag's own variants set), replayed as events over
the flags a client held at ANY earlier revision, gives exactly the flags the client
features answer gives at the end: the same features, and the same segments for every
segment they use. Through the real services and change log on a SQLite file, read by the
standalone's cache; events applied as the SDKs apply them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

from deltakit import Held, agrees, replay
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from relay.central.flags.dependencies import DependencyService
from relay.central.flags.dependency_records import DependencyRecords
from relay.central.flags.flag_records import FlagRecords
from relay.central.flags.flags import FlagService
from relay.central.flags.segment_records import SegmentRecords
from relay.central.flags.segments import SegmentService
from relay.central.flags.served_deltas import ServedDeltas
from relay.central.flags.serving import ClientFeaturesCache
from relay.central.flags.strategies import StrategyService
from relay.central.flags.variants import VariantService
from relay.central.flags.writes import Writer
from relay.central.project_records import SqlProjectRecords
from relay.central.projects import ProjectStore
from relay.core.audit import Actor
from relay.core.catalog import Scope
from relay.core.errors import Conflict, InvalidInput, InvalidOperation, NotFound
from relay.store.sql import CENTRAL_SCHEMA
from relay.store.sqlite import SqliteDatabase
from relay.wire.admin import ProjectEnvironment
from relay.wire.flags import CreateDependency, CreateFlag, PushVariants, UpsertSegment
from relay.wire.strategies import Strategy

ACTOR = Actor("tests")

FLAGS = ("a.one", "a.two", "b.one")
SEGMENTS = ("beta", "gamma")
ENV = "development"
SCOPES = (
    Scope(ENV, None, None, False),
    Scope(ENV, None, "a.", False),
    Scope("production", ("default",), None, False),
)

operation = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(FLAGS)),
    st.tuples(st.just("turn"), st.sampled_from(FLAGS), st.booleans()),
    st.tuples(st.just("strategy"), st.sampled_from(FLAGS), st.sampled_from((None, *SEGMENTS))),
    st.tuples(st.just("unstrategy"), st.sampled_from(FLAGS)),
    st.tuples(st.just("archive"), st.sampled_from(FLAGS)),
    st.tuples(st.just("revive"), st.sampled_from(FLAGS)),
    st.tuples(st.just("segment"), st.sampled_from(SEGMENTS), st.integers(0, 3)),
    st.tuples(st.just("unsegment"), st.sampled_from(SEGMENTS)),
    st.tuples(st.just("environment"), st.booleans()),
    st.tuples(st.just("depend"), st.sampled_from(FLAGS), st.sampled_from(FLAGS), st.booleans()),
    st.tuples(st.just("undepend"), st.sampled_from(FLAGS)),
    st.tuples(st.just("variants"), st.sampled_from(FLAGS), st.integers(0, 2)),
)


class Admin:
    def __init__(self, db: SqliteDatabase) -> None:
        writer = Writer(db)
        self.flags = FlagService(writer, FlagRecords())
        self.strategies = StrategyService(writer)
        self.segments = SegmentService(writer, SegmentRecords())
        self.projects = ProjectStore(SqlProjectRecords(db, writer))
        self.dependencies = DependencyService(writer, DependencyRecords())
        self.variants = VariantService(writer)

    async def apply(self, op: tuple[Any, ...]) -> None:
        with contextlib.suppress(Conflict, InvalidInput, NotFound, InvalidOperation):
            await self._apply(*op)  # refused changes are part of any sequence too

    async def _segment_id(self, name: str) -> int:
        found = [s.id for s in await self.segments.all() if s.name == name]
        if not found:
            raise NotFound(name)
        return found[0]

    async def _apply(self, kind: str, *args: Any) -> None:
        match kind:
            case "create":
                await self.flags.create(ACTOR, "default", CreateFlag(name=args[0]))
            case "turn":
                await self.flags.set_enabled(ACTOR, "default", args[0], ENV, args[1])
            case "strategy":
                ids = [] if args[1] is None else [await self._segment_id(args[1])]
                body = Strategy(name="default", segments=ids)
                await self.strategies.add(ACTOR, "default", args[0], ENV, body)
            case "unstrategy":
                found = await self.strategies.of_environment("default", args[0], ENV)
                if found:
                    await self.strategies.delete(ACTOR, "default", args[0], ENV, found[0].id)
            case "archive":
                await self.flags.archive(ACTOR, "default", args[0])
            case "revive":
                await self.flags.revive(ACTOR, args[0])
            case "segment":
                body = _segment(args[0], args[1])
                try:
                    await self.segments.update(ACTOR, await self._segment_id(args[0]), body)
                except NotFound:
                    await self.segments.create(ACTOR, body)
            case "unsegment":
                await self.segments.delete(ACTOR, await self._segment_id(args[0]))
            case "environment" if args[0]:
                await self.projects.add_environment(
                    ACTOR, "default", ProjectEnvironment(environment=ENV)
                )
            case "environment":
                await self.projects.remove_environment(ACTOR, "default", ENV)
            case "depend":
                body = CreateDependency(feature=args[1], enabled=args[2], variants=["v0"])
                await self.dependencies.add(ACTOR, "default", args[0], body)
            case "undepend":
                await self.dependencies.delete(ACTOR, "default", args[0])
            case "variants":
                variants = [{"name": f"v{i}", "weight": 0} for i in range(args[1])]
                body = PushVariants.model_validate({"variants": variants, "environments": [ENV]})
                await self.variants.push(ACTOR, "default", args[0], body)


def _segment(name: str, value: int) -> UpsertSegment:
    constraint = {"contextName": "userId", "operator": "IN", "values": [str(value)]}
    return UpsertSegment.model_validate({"name": name, "constraints": [constraint]})


def held(answer: bytes) -> Held:
    body = json.loads(answer)
    return {f["name"]: f for f in body["features"]}, {s["id"]: s for s in body["segments"]}


async def scenario(directory: Path, operations: list[tuple[Any, ...]]) -> None:
    db = SqliteDatabase(directory / "relay.db", CENTRAL_SCHEMA)
    await db.open()
    try:
        admin, cache = Admin(db), ClientFeaturesCache(db)
        deltas = ServedDeltas(cache)
        history: list[tuple[int, dict[Scope, Held]]] = []
        for op in [None, *operations]:
            if op is not None:
                await admin.apply(op)
            await cache.poll()
            revision = (await deltas.delta(SCOPES[0], None)).revision
            history.append((revision, {s: held((await cache.answer(s)).body) for s in SCOPES}))
        for scope in SCOPES:
            final = history[-1][1][scope]
            for revision, answers in history:
                found = await deltas.delta(scope, revision)
                events = json.loads(found.body)["events"] if found.events else []
                got = replay(answers[scope], events)
                assert agrees(got, final), (scope, revision, events, got, final)
                assert found.events == 0 or found.last <= history[-1][0]
    finally:
        await db.close()


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(operation, max_size=25))
@example([("segment", "beta", 1), ("create", "a.one"), ("strategy", "a.one", "beta")])
@example([("create", "a.one"), ("turn", "a.one", True), ("environment", False)])
@example([("create", "a.one"), ("create", "a.two"), ("depend", "a.two", "a.one", True)])
@example([("create", "a.one"), ("variants", "a.one", 2), ("archive", "a.one")])
def test_events_from_any_revision_give_the_final_answer(operations: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(scenario(Path(directory), operations))
