"""Unleash 8.2's export file of flags (``exportResultSchema``), built from ours: one
environment's view of each flag, and the tags, tag types, segments and dependencies it
names. Apart from ``transfer``, which checks what is chosen and logs the export."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from relay.central.flags.flags import strategy_out
from relay.central.flags.records import Reads
from relay.core.flags import FlagRecord
from relay.wire import flags as wire
from relay.wire import transfer as t
from relay.wire.common import FlagType
from relay.wire.strategies import SAVED


class ExportStorage(Protocol):
    """What an export names besides the flags (``transfer_records.TransferRecords``)."""

    async def tags_of(self, db: Reads, names: Sequence[str]) -> list[tuple[str, str, str]]:
        """(flag, tag type, value) of the tags of the flags of ``names``, in that order."""
        ...

    async def segment_names(self, db: Reads, ids: Sequence[int]) -> list[tuple[int, str]]:
        """(id, name) of the segments of ``ids`` that exist, by id."""
        ...

    async def tag_types(self, db: Reads, names: Sequence[str]) -> list[wire.TagType]:
        """The tag types of ``names`` that exist, by name."""
        ...


async def exported(
    records: ExportStorage, db: Reads, flags: Sequence[FlagRecord], environment: str
) -> t.ExportResult:
    """Unleash's export of ``flags`` from ``environment``."""
    tags = await records.tags_of(db, [f.name for f in flags])
    strategies = [
        t.ExportedStrategy.model_validate(
            strategy_out(f.name, s).model_dump(mode="json", exclude_none=True), context=SAVED
        )
        for f in flags
        for s in f.environment(environment).strategies
    ]
    segments = await records.segment_names(db, sorted({i for s in strategies for i in s.segments}))
    types = await records.tag_types(db, sorted({kind for _, kind, _ in tags}))
    return t.ExportResult(
        features=[
            t.ExportedFeature(
                name=f.name,
                type=FlagType(f.type),
                description=f.description,
                project=f.project,
                stale=f.stale,
                impressionData=f.impression_data,
            )
            for f in flags
        ],
        featureStrategies=strategies,
        featureEnvironments=[
            t.ExportedEnvironment.model_validate(
                {
                    "name": f.name,
                    "featureName": f.name,
                    "environment": environment,
                    "enabled": f.environments[environment].enabled,
                    "variants": list(f.environments[environment].variants),
                },
                context=SAVED,
            )
            for f in flags
            if environment in f.environments
        ],
        featureTags=[
            t.ExportedTag(featureName=flag, tagType=kind, tagValue=value)
            for flag, kind, value in tags
        ],
        segments=[t.ExportedSegment(id=id, name=name) for id, name in segments],
        tagTypes=[t.ExportedTagType.model_validate(kind.model_dump()) for kind in types],
        dependencies=[
            t.ExportedDependency(
                feature=f.name,
                dependencies=[
                    wire.CreateDependency(
                        feature=d.parent, enabled=d.enabled, variants=list(d.variants)
                    )
                    for d in f.dependencies
                ],
            )
            for f in flags
            if f.dependencies
        ],
    )
