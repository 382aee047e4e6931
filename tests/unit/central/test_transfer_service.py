"""TransferService's import over in-memory flags: Unleash's checks in its words (what it
refuses and warns of, answered by validate without changing anything, refused whole by
import), and an import's steps through the other services in one write, undone whole when
one refuses. tests/test_flags_transfer.py proves ``transfer_records`` on SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest
from fake_flag_storage import FakeDependencies, FakeFlagRecords, FakeTags, FakeTransfer
from fake_flag_write import ACTOR, FakeWriter

from relay.central.flags.transfer import ImportStorage, TransferService
from relay.core.audit import EventType
from relay.core.errors import InvalidInput, InvalidOperation, NotFound
from relay.wire import transfer as t


def service() -> tuple[TransferService, FakeWriter]:
    writer = FakeWriter()
    writer.flags.add_project("default", "production")
    writer.flags.add_project("shop", "production")
    writer.flags.add_flag("checkout")
    writer.flags.add_flag("basket", "shop")
    writer.flags.add_flag("old", archived_at=1.0)
    writer.flags.add_segment(1, "shop")  # not for flags of default: "segment-1" is missing
    writer.flags.add_segment(2)
    flags = writer.flags
    imports = ImportStorage(FakeFlagRecords(flags), FakeTags(flags), FakeDependencies(flags))
    return TransferService(writer, FakeTransfer(flags), imports), writer


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


def clean() -> t.ImportBody:
    """The file of a flag ``fresh`` that depends on ``checkout`` (which it updates),
    with variants, a tag of a new type and a strategy naming the global segment."""
    data = {
        "features": [{"name": "checkout", "stale": True}, {"name": "fresh"}],
        "featureStrategies": [{"name": "default", "featureName": "fresh", "segments": [9]}],
        "featureEnvironments": [
            {"name": "fresh", "enabled": True, "variants": [{"name": "blue", "weight": 0}]}
        ],
        "segments": [{"id": 9, "name": "segment-2"}],
        "featureTags": [{"featureName": "fresh", "tagType": "team", "tagValue": "shop"}],
        "tagTypes": [{"name": "team"}],
        "dependencies": [{"feature": "fresh", "dependencies": [{"feature": "checkout"}]}],
    }
    return t.ImportBody.model_validate(
        {"project": "default", "environment": "production", "data": data}
    )


async def test_an_import_goes_through_the_services_in_one_write() -> None:
    transfer, writer = service()
    assert (await transfer.validate(ACTOR, clean())).errors == []
    assert set(writer.flags.flags) == {"checkout", "basket", "old"}  # validate undid it
    await transfer.import_(ACTOR, clean())
    assert writer.revision == 2  # validate's write and the import's
    fresh = writer.flags.flags["fresh"]
    production = fresh.environment("production")
    assert production.enabled
    assert [(s.name, s.segments) for s in production.strategies] == [("default", (2,))]
    assert [v["name"] for v in production.variants] == ["blue"]
    assert [d.parent for d in fresh.dependencies] == ["checkout"]
    assert writer.flags.tags["fresh"] == {("team", "shop")}
    assert writer.flags.flags["checkout"].stale
    assert writer.log.types()[0] == EventType.FEATURE_METADATA_UPDATED
    assert writer.log.types()[-1] == EventType.FEATURES_IMPORTED


async def test_an_import_a_service_refuses_is_undone_whole() -> None:
    transfer, writer = service()
    refused = clean().model_copy(
        update={
            "data": clean().data.model_copy(
                update={
                    "dependencies": [
                        t.ExportedDependency.model_validate(
                            {"feature": "fresh", "dependencies": [{"feature": "fresh"}]}
                        )
                    ]
                }
            )
        }
    )
    answer = await transfer.validate(ACTOR, refused)
    assert [e.message for e in answer.errors] == ["A feature flag cannot depend on itself."]
    with pytest.raises(InvalidOperation, match="cannot depend on itself"):
        await transfer.import_(ACTOR, refused)
    assert "fresh" not in writer.flags.flags
    assert writer.flags.kinds.keys() == {"simple"}
    assert writer.log.recorded == []
