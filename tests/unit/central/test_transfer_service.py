"""TransferService's checks of an import over in-memory flags (Unleash's, in its words):
what it refuses and warns of, answered by validate without changing anything, and refused
whole by import. tests/test_flags_transfer.py proves ``transfer_records`` and the import
itself on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from fake_flag_write import ACTOR, FakeFlags, FakeWriter

from relay.central.flags.transfer import ImportStorage, TransferService
from relay.core.errors import InvalidInput, NotFound
from relay.core.flags import FlagRecord
from relay.wire import transfer as t


class FakeTransfer:
    """What an import is checked against, read from ``flags``."""

    def __init__(self, flags: FakeFlags) -> None:
        self.flags = flags

    async def flags_named(self, db: Any, names: Sequence[str]) -> list[FlagRecord]:
        return [self.flags.flags[n] for n in sorted(set(names)) if n in self.flags.flags]

    async def active(self, db: Any, names: Sequence[str]) -> set[str]:
        return {f.name for f in await self.flags_named(db, names) if f.archived_at is None}

    async def segments_for(self, db: Any, project: str) -> list[tuple[int, str]]:
        return [
            (s.id, s.name)
            for s in sorted(self.flags.segments.values(), key=lambda s: s.id)
            if s.project in (None, project)
        ]


def service() -> tuple[TransferService, FakeWriter]:
    writer = FakeWriter()
    writer.flags.add_project("default", "production")
    writer.flags.add_project("shop", "production")
    writer.flags.add_flag("checkout")
    writer.flags.add_flag("basket", "shop")
    writer.flags.add_flag("old", archived_at=1.0)
    writer.flags.add_segment(1, "shop")  # not for flags of default: "segment-1" is missing
    writer.flags.add_segment(2)
    nothing: Any = None  # the plan's refusals come before any service writes
    imports = ImportStorage(nothing, nothing, nothing)
    transfer = TransferService(writer, FakeTransfer(writer.flags), imports)
    return transfer, writer


def body(project: str = "default", environment: str = "production") -> t.ImportBody:
    data = {
        "features": [{"name": n} for n in ("checkout", "basket", "old", "fresh", "fresh")],
        "featureStrategies": [
            {"name": "default", "featureName": "fresh", "segments": [1, 2, 7]},
        ],
        "segments": [{"id": 1, "name": "segment-1"}, {"id": 2, "name": "segment-2"}],
        "featureTags": [{"featureName": "stray", "tagType": "simple", "tagValue": "xx"}],
        "dependencies": [
            {"feature": "fresh", "dependencies": [{"feature": "parent"}]},
            {"feature": "checkout", "dependencies": [{"feature": "fresh"}]},
        ],
    }
    return t.ImportBody.model_validate(
        {"project": project, "environment": environment, "data": data}
    )


async def test_validate_answers_every_refusal_and_warning_changing_nothing() -> None:
    transfer, writer = service()
    before = dict(writer.flags.flags)
    answer = await transfer.validate(ACTOR, body(environment="staging"))
    errors = {e.message.split(":")[0]: e.affectedItems for e in answer.errors}
    assert errors == {
        "The environment is not enabled in project default": ["staging"],
        "You cannot import a features that already exist in other projects. You already"
        " have the following features defined outside of project default": [
            "basket (in project shop)"
        ],
        "We detected the following features are duplicate in your import data": ["fresh"],
        "We detected the following segments that need to be created first": [
            "segment-1",
            "segment 7 (not in segments)",
        ],
        "We detected the following dependencies that need to be created first": ["parent"],
        "The following flags are named by strategies, environments, tags or dependencies"
        " but not listed in features": ["stray"],
    }
    warnings = [(w.message.split(" ")[3], w.affectedItems) for w in answer.warnings]
    assert warnings == [("will", ["old"]), ("already", ["checkout"])]
    assert writer.flags.flags == before
    assert writer.log.recorded == []


async def test_an_import_with_errors_is_refused_whole_and_a_project_must_exist() -> None:
    transfer, writer = service()
    with pytest.raises(InvalidInput, match="The environment is not enabled") as refused:
        await transfer.import_(ACTOR, body(environment="staging"))
    assert refused.value.path == "/body/data"
    with pytest.raises(NotFound, match="Active project with id nope does not exist"):
        await transfer.validate(ACTOR, body("nope"))
    assert writer.log.recorded == []
