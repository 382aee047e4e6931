"""Unleash 8.2's export file of flags (``exportResultSchema``), built from ours: one
environment's view of each flag, and the tags, tag types, segments and dependencies it
names. Apart from ``transfer``, which checks what is chosen and logs the export."""

from __future__ import annotations

from collections.abc import Sequence

from relay.central.flags.flags import strategy_out
from relay.central.flags.records import Reads
from relay.core.flags import FlagRecord
from relay.wire import flags as wire
from relay.wire import transfer as t
from relay.wire.strategies import SAVED


async def exported(db: Reads, flags: Sequence[FlagRecord], environment: str) -> t.ExportResult:
    """Unleash's export of ``flags`` from ``environment``."""
    names = [f.name for f in flags]
    marks = ", ".join("?" * len(names))
    tags = (
        await db.fetch_all(
            "SELECT feature_name, tag_type, tag_value FROM feature_tags"
            f" WHERE feature_name IN ({marks}) ORDER BY feature_name, tag_type, tag_value",
            names,
        )
        if names
        else []
    )
    strategies = [
        t.ExportedStrategy.model_validate(
            strategy_out(f.name, s).model_dump(mode="json", exclude_none=True), context=SAVED
        )
        for f in flags
        for s in f.environment(environment).strategies
    ]
    used = sorted({i for s in strategies for i in s.segments})
    segments = (
        await db.fetch_all(
            f"SELECT id, name FROM segments WHERE id IN ({', '.join('?' * len(used))}) ORDER BY id",
            used,
        )
        if used
        else []
    )
    kinds = sorted({str(row[1]) for row in tags})
    types = (
        await db.fetch_all(
            "SELECT name, description, icon, color FROM tag_types"
            f" WHERE name IN ({', '.join('?' * len(kinds))}) ORDER BY name",
            kinds,
        )
        if kinds
        else []
    )
    return t.ExportResult(
        features=[
            t.ExportedFeature(
                name=f.name,
                type=wire.FlagType(f.type),
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
            t.ExportedTag(featureName=row[0], tagType=row[1], tagValue=row[2]) for row in tags
        ],
        segments=[t.ExportedSegment(id=int(row[0]), name=row[1]) for row in segments],
        tagTypes=[
            t.ExportedTagType(name=r[0], description=r[1], icon=r[2], color=r[3]) for r in types
        ],
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
