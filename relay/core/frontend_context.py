"""A Frontend API caller's context, read as Unleash reads it (its ``createContext``):
``appName``, ``environment``, ``userId``, ``sessionId`` and ``remoteAddress`` are fields, an
empty one is absent; every other key, and those under ``properties``, are properties
(``properties`` wins on a clash). ``currentTime`` is a property like any other: date
constraints use the server's clock. Absent, ``remoteAddress`` is the caller's address and
``sessionId`` a fresh random one; ``appName`` and ``environment`` default to what Unleash's
own evaluation client has (``frontend-api``, ``default``). The Frontend API, the Proxy's
paths, OFREP and the playground read contexts here.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from datetime import datetime
from urllib.parse import unquote

from relay.core.evaluate import Context
from relay.wire.frontend import FrontendContext

FIELDS = ("appName", "environment", "userId", "sessionId", "remoteAddress")
DEFAULT_APP = "frontend-api"
DEFAULT_ENVIRONMENT = "default"

Fields = dict[str, str]


def _text(value: object) -> str | None:
    """A context value as its text, as JavaScript's ``String`` writes it; None is absent."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def from_pairs(pairs: Iterable[tuple[str, str]]) -> tuple[Fields, Fields]:
    """A query's ``(fields, properties)``: ``properties[name]=value`` and unknown keys are
    properties; a key given twice counts once, first wins (as ``qs`` would make it a list,
    which no constraint matches)."""
    fields: Fields = {}
    rest: Fields = {}
    given: Fields = {}
    for key, value in pairs:
        if key in FIELDS:
            fields.setdefault(key, value)
        elif key.startswith("properties[") and key.endswith("]"):
            given.setdefault(key[11:-1], value)
        else:
            rest.setdefault(key, value)
    return fields, rest | given


def from_query(raw: str) -> tuple[Fields, Fields]:
    """``from_pairs`` of a raw query string, decoded as ``urllib.parse.parse_qsl`` with
    blank values kept decodes it (``+`` a space, ``%XX`` UTF-8 with replacement), but only
    the pieces that need it: a browser's query is parsed on every request, and
    ``parse_qsl``'s generality cost as much as the rest of a cached answer."""
    return from_pairs(_pair(piece) for piece in raw.split("&") if piece)


def _pair(piece: str) -> tuple[str, str]:
    name, _, value = piece.partition("=")
    return _decoded(name), _decoded(value)


def _decoded(text: str) -> str:
    if "+" in text:
        text = text.replace("+", " ")
    return unquote(text) if "%" in text else text


def from_model(context: FrontendContext) -> tuple[Fields, Fields]:
    """A parsed context (a ``POST`` body's, the playground's) as ``(fields, properties)``,
    values as text."""
    known = {k: t for k in FIELDS if (t := _text(getattr(context, k))) is not None}
    merged = {**context.extra, **(context.properties or {})}
    return known, {k: t for k, v in merged.items() if (t := _text(v)) is not None}


def context_of(
    fields: Fields,
    properties: Fields,
    caller: str | None,
    now: datetime,
    session: Callable[[], str | None] = lambda: secrets.token_hex(18),
) -> Context:
    """The context evaluated: empty fields absent, the caller's address and a fresh
    session where none was given (Unleash's ``enrichContextWithIp``; the playground gives
    no session, to show what a context without one gets)."""

    def field(name: str) -> str | None:
        return fields.get(name) or None

    given = field("sessionId")
    made = None if given is not None else session()
    return Context(
        app_name=field("appName") or DEFAULT_APP,
        environment=field("environment") or DEFAULT_ENVIRONMENT,
        user_id=field("userId"),
        session_id=given or made,
        remote_address=field("remoteAddress") or caller,
        current_time=now,
        properties=properties,
        session_made_up=made is not None,
    )
