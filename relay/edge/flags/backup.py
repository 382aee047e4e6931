"""Unleash Edge's backup folder (``backup_folder``, Edge's ``BACKUP_FOLDER``) read at a
relay's first start, so a fleet moving from Edge serves flags at once, before its upstream
answers, and knows the keys Edge knew. Once ``cache.db`` holds a copy, the folder is never
read again: the relay's own cache takes over (``relay.edge.flags.store``).

What is taken, and how far it is trusted (no further than Edge trusts it):

- ``unleash_tokens.json``: client (``client``, ``backend``) keys Edge had validated
  upstream (status ``Validated``), whose environment and project, read from the key
  itself, are those the file says. They are recorded as keys that read flags before a
  restart (``FlagStore.keys``): accepted while the upstream cannot be asked, checked with
  it as soon as it can (``relay.edge.key_resolver``). Frontend keys, multi-project keys
  (``[]:``) and keys of any other status are left out: the upstream is asked about them.
- ``unleash_features.json``: each key's environment's flags (Edge keeps them per
  environment), stored as that key's scope's copy, dated by the file's modification time
  and refreshed upstream at once (no ETag is carried over).

A file that is missing or does not read is logged and skipped: never a reason not to start.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from relay.core.client_features import read
from relay.core.keys import InvalidKey, Principal, hash_key, parse_key
from relay.edge.flags.files import read_bounded
from relay.edge.flags.store import Copy, FlagScope, FlagStore, KeySeen, Saved, Write
from relay.wire.common import KeyType
from relay.wire.edges import EdgeFeatures, EdgeToken, EdgeTokens

log = logging.getLogger(__name__)

TOKENS = "unleash_tokens.json"
FEATURES = "unleash_features.json"
MAX_FILE_BYTES = 256 * 1024 * 1024
CLIENT_TYPES = ("client", "backend")


def restored(
    folder: Path | None, store: FlagStore, interval: float
) -> Callable[[web.Application], AsyncIterator[None]]:
    """A worker alone restores ``folder``'s backup (if one is set) into the opened cache
    file, before the flag cache and the key resolver load it; with several,
    ``initialise`` did."""

    async def ctx(app: web.Application) -> AsyncIterator[None]:
        if folder is not None:
            await restore(folder, store, interval)
        yield

    return ctx


async def restore(folder: Path, store: FlagStore, interval: float) -> None:
    """The backup's keys and their flags into ``store`` (``cache.db``), when it holds no
    copy yet."""
    if await store.heads(0):
        return
    tokens = _load(folder / TOKENS, EdgeTokens.validate_json)
    features = dict(_load(folder / FEATURES, EdgeFeatures.validate_json) or [])
    if tokens is None:
        return
    dated = _modified(folder / FEATURES)
    # each copy in the file checked and encoded once, each scope saved once, however many
    # keys share them (an Edge with hundreds of keys of one environment)
    bodies: dict[str, bytes | None] = {}
    saved: dict[FlagScope, bytes] = {}
    seen: list[Write] = []
    for token in tokens:
        principal = _trusted(token)
        if principal is None:
            continue
        # Edge names a copy by its keys' environment, or by the key when it has none
        name = principal.environment if principal.environment in features else token.token
        if name not in bodies:
            bodies[name] = _flags(features.get(name))
        body = bodies[name]
        if body is None:
            continue
        scope = FlagScope(principal.environment, principal.projects)
        saved.setdefault(scope, body)
        seen.append(KeySeen(hash_key(token.token), scope, principal.display, time.time()))
    copies: list[Write] = [Saved(scope, Copy(body, "", dated)) for scope, body in saved.items()]
    await store.write([*copies, *seen], (), time.time(), interval)
    log.info(
        "Unleash Edge backup restored: its keys are known and their flags served until the"
        " upstream answers",
        extra={"folder": str(folder), "keys": len(seen), "left_out": len(tokens) - len(seen)},
    )


def _trusted(token: EdgeToken) -> Principal | None:
    """The key's grants, when Edge validated it and its file agrees with the key itself."""
    if token.status != "Validated" or token.type not in CLIENT_TYPES:
        return None
    try:
        principal = parse_key(token.token, KeyType.CLIENT).principal
    except InvalidKey:
        return None
    if token.token.startswith("[]:") or token.environment != principal.environment:
        return None
    if list(principal.projects) != token.projects:
        return None
    return principal


def _flags(answer: dict[str, object] | None) -> bytes | None:
    if answer is None:
        return None
    body = json.dumps(answer).encode()
    try:
        read(body)
    except (ValueError, RecursionError):
        return None
    return body


def _load(path: Path, parse: Any) -> Any:
    try:
        return parse(read_bounded(path, MAX_FILE_BYTES))
    except (ValueError, ValidationError) as exc:  # NotReadable is a ValueError
        log.warning(
            "Unleash Edge backup file not read",
            extra={"path": str(path), "error": str(exc).splitlines()[0][:300]},
        )
        return None


def _modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
