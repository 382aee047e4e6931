"""The Unleash Proxy's answers, pure: a context read as the Proxy (npm ``@unleash/proxy``
1.4.19) reads it, its flags narrowed as its SDK fetched them, and the toggles of a ``POST``
naming them. The evaluation and the toggles' JSON are the Frontend API's
(``relay.core.frontend``): the Proxy answered in that shape.

What the Proxy did with a context (``createContext``, then its Node SDK):

- ``appName``, ``environment``, ``userId``, ``sessionId``, ``remoteAddress`` and
  ``currentTime`` are fields, an empty one absent; any other key, and those under
  ``properties``, are properties (``properties`` wins on a clash).
- A missing ``appName`` is the Proxy's own (``UNLEASH_APP_NAME``); ``environment`` is
  ``UNLEASH_ENVIRONMENT`` when set, whatever the caller says, else the caller's, else
  ``default``; ``remoteAddress`` is the caller's address when none is given.
- ``currentTime`` is honoured, read as JavaScript's ``Date`` reads an ISO 8601 text (one
  that does not read is the clock's time): unlike the Frontend API of ``/api/frontend``,
  whose date constraints only the server's clock decides, a caller of ``/proxy`` could
  always choose it, and answers must stay the Proxy's.
- A random ``sessionId`` is added when none is given, except for the toggles a ``POST``
  names (its ``getDefinedToggles`` adds none).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from urllib.parse import unquote_plus

from relay.core.catalog import Rendered, encode
from relay.core.evaluate import Context
from relay.core.frontend import Scoped
from relay.core.frontend_context import Fields, context_of, from_model, from_query
from relay.wire.frontend import FrontendContext

CLOCK = "currentTime"
NOT_READY = (
    "The Unleash Proxy has not connected to the Unleash API and is not ready to accept"
    " requests yet."
)
"""The Proxy's words for 503 before its first fetch (relay's: before its first copy)."""
ALL_DISABLED = (
    "The /proxy/all endpoint is disabled. Please check your server configuration. To enable"
    " it, set the `enableAllEndpoint` configuration option or `ENABLE_ALL_ENDPOINT`"
    " environment variable to `true`."
)


def query_context(raw: str) -> tuple[Fields, Fields, str | None]:
    """A query's ``(fields, properties, currentTime)``: ``relay.core.frontend_context.from_query``
    but for a top-level ``currentTime``, which is a field here, not a property."""
    clock: str | None = None
    kept = []
    for piece in raw.split("&"):
        name, _, value = piece.partition("=")
        if name == CLOCK or (("%" in name or "+" in name) and unquote_plus(name) == CLOCK):
            clock = clock if clock is not None else unquote_plus(value)
        else:
            kept.append(piece)
    fields, properties = from_query("&".join(kept))
    return fields, properties, clock


def body_context(context: FrontendContext) -> tuple[Fields, Fields, str | None]:
    """A posted context's ``(fields, properties, currentTime)``."""
    fields, properties = from_model(context)
    clock = context.extra.get(CLOCK)
    if CLOCK in context.extra and CLOCK not in (context.properties or {}):
        properties.pop(CLOCK, None)
    return fields, properties, None if clock is None else str(clock)


def proxy_context(
    read: tuple[Fields, Fields, str | None],
    caller: str | None,
    now: datetime,
    app_name: str,
    environment: str | None,
    random_session: bool = True,
) -> Context:
    """The context the Proxy evaluated for what ``query_context`` or ``body_context`` read."""
    fields, properties, clock = read
    fields = dict(fields)
    if not fields.get("appName"):
        fields["appName"] = app_name
    if environment is not None:
        fields["environment"] = environment
    moment = (js_date(clock) if clock else None) or now
    if random_session:
        return context_of(fields, properties, caller, moment)
    return context_of(fields, properties, caller, moment, session=lambda: None)


def js_date(text: str) -> datetime | None:
    """``new Date(text)`` for the texts it reads alike everywhere: ISO 8601 (a date alone
    is midnight UTC; a time without an offset is read as UTC, the time zone of a container)
    and RFC 2822 dates; None for anything else (JavaScript's ``Invalid Date``), and for a
    time UTC cannot hold in years 1 to 9999 (``0001-01-01T00:00+05:00``)."""
    text = text.strip()
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
    if moment.utcoffset() is None:
        return moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        return None


def narrowed(rendered: Rendered, prefix: str) -> Rendered:
    """``rendered`` with only the flags whose name starts with ``prefix``, as the Proxy's
    SDK fetched them with ``namePrefix`` (a child whose parent is left out is off, as it
    was for that SDK); its ETag says which prefix."""
    document = json.loads(rendered.body)
    features = [f for f in document.get("features", []) if str(f.get("name")).startswith(prefix)]
    body = json.dumps({**document, "features": features}, separators=(",", ":")).encode()
    digest = hashlib.sha256(f"{rendered.etag}\n{prefix}".encode()).hexdigest()[:32]
    return Rendered(body, f'"{digest}"', rendered.revision, len(features))


def unknown_toggle(name: str) -> bytes:
    """A toggle the Proxy's client does not know, as its ``getDefinedToggles`` answers it."""
    variant = {
        "name": "disabled",
        "enabled": False,
        "feature_enabled": False,
        "featureEnabled": False,
    }
    toggle = {"name": name, "enabled": False, "variant": variant, "impressionData": False}
    return encode(toggle)


def defined_toggles(scoped: Scoped, context: Context, names: Sequence[str]) -> bytes:
    """The toggles a ``POST`` names, in its order (a name twice: twice), each evaluated
    whether enabled or not; those the scope does not have, off."""
    return toggles(scoped.one(context, name) or unknown_toggle(name) for name in names)


def toggles(fragments: Iterable[bytes]) -> bytes:
    return b'{"toggles":[' + b",".join(fragments) + b"]}"
