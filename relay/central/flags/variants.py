"""A flag's own variants per environment (Unleash's environment variants), as Unleash 8.2
keeps them: deprecated in favour of strategy variants, so the per-environment PUT and PATCH
refuse a flag that has none in any environment (403), while ``variants-batch`` sets them
on any flag. Weights are fixed as strategy variants' are (``fix_weights``: ``fix`` ones
keep theirs, ``variable`` ones share the rest of 1000), names unique, sorted by name.

Each change is one flag write (``writes.Writer``) that touches the flag, so SDKs get the
new ``variants`` through the client API, delta and streaming; what one environment holds
is bounded with its strategies (``FlagWrite.check_room``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from relay.central.flags.writes import FlagWrite, Writer
from relay.core import jsonpatch
from relay.core.audit import Actor, EventType
from relay.core.errors import InvalidInput, InvalidOperation, NotFound
from relay.core.flags import FlagRecord, fix_weights
from relay.wire import flags as wire
from relay.wire.strategies import SAVED, Variant


class VariantService:
    def __init__(self, writer: Writer) -> None:
        self._write = writer
        self._db = writer.db

    async def of_environment(self, project: str, flag: str, environment: str) -> list[Variant]:
        found = await self._write.records.flag(self._db, flag)
        if found is None or found.project != project:
            raise NotFound(f'There\'s no feature named "{flag}" in project "{project}"')
        return _variants(found, environment)

    async def replace(
        self,
        actor: Actor,
        project: str,
        flag: str,
        environment: str,
        variants: Sequence[Variant],
    ) -> list[Variant]:
        """PUT on one environment: only for a flag that has environment variants."""
        async with self._write(actor) as w:
            record = await _legacy(w, project, flag)
            return await _save(w, record, [environment], variants)

    async def patch(
        self,
        actor: Actor,
        project: str,
        flag: str,
        environment: str,
        operations: Sequence[wire.PatchOperation],
    ) -> list[Variant]:
        """A JSON Patch of the environment's variants (a list, as GET shows it)."""
        async with self._write(actor) as w:
            record = await _legacy(w, project, flag)
            current = [v.model_dump(mode="json") for v in _variants(record, environment)]
            rooted = [
                op.model_copy(
                    update={
                        "path": f"/variants{op.path}",
                        "from_": None if op.from_ is None else f"/variants{op.from_}",
                    }
                )
                for op in operations
            ]
            body = jsonpatch.patched(wire.PushVariants, {"variants": current}, rooted)
            return await _save(w, record, [environment], body.variants)

    async def push(
        self, actor: Actor, project: str, flag: str, body: wire.PushVariants
    ) -> list[Variant]:
        """``variants-batch``: the same variants in each environment named; answered in
        the order sent, weights fixed, as Unleash answers it (stored sorted by name)."""
        if not body.environments:
            raise InvalidInput("No environments provided")
        async with self._write(actor) as w:
            record = await w.flag(project, flag)
            saved = await _save(w, record, body.environments, body.variants)
        sent = {v.name: i for i, v in enumerate(body.variants)}
        return sorted(saved, key=lambda v: sent[v.name])


async def _legacy(w: FlagWrite, project: str, flag: str) -> FlagRecord:
    record = await w.flag(project, flag)
    if not any(state.variants for state in record.environments.values()):
        raise InvalidOperation(
            f"Environment variants deprecated for feature: {flag}. Use strategy variants instead."
        )
    return record


async def _save(
    w: FlagWrite, flag: FlagRecord, environments: Sequence[str], variants: Sequence[Variant]
) -> list[Variant]:
    """The variants, weights fixed, set in each environment (enabled in the flag's project),
    each environment's change an event."""
    fixed = fix_weights(variants)
    after = [v.model_dump(mode="json", exclude_none=True) for v in fixed]
    stored = json.dumps(after)
    for environment in dict.fromkeys(environments):
        if await w.project_environment(flag.project, environment) is None:
            raise InvalidInput(
                f"Environment {environment} is not enabled in project {flag.project}"
            )
        await w.check_room(flag, environment, path="/body/variants", variants=stored)
        await w.records.set_variants(w.tx, flag.name, environment, stored)
        await w.event(
            EventType.FEATURE_ENVIRONMENT_VARIANTS_UPDATED,
            project=flag.project,
            feature=flag.name,
            environment=environment,
            before=[
                v.model_dump(mode="json", exclude_none=True) for v in _variants(flag, environment)
            ],
            after=after,
        )
    await w.touch(flag.name)
    return fixed


def _variants(flag: FlagRecord, environment: str) -> list[Variant]:
    return [
        Variant.model_validate(v, context=SAVED) for v in flag.environment(environment).variants
    ]
