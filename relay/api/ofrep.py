"""OFREP, the OpenFeature Remote Evaluation Protocol, in every mode: any OpenFeature SDK
with an OFREP provider reads the flags of a frontend or a client key (``Authorization``,
bare or ``Bearer``, or ``X-API-Key``), evaluated by the Frontend API's evaluator and
compiled forms (``relay.core.ofrep``) from each mode's ``EvaluationSource``: the central
service's flags, or a relay's copy of its upstream's (so answers go on through an outage).

- ``POST /ofrep/v1/evaluate/flags/{key}``: one flag; 404 ``FLAG_NOT_FOUND`` for a flag the
  key does not see, 400 with the flag's failure (``PARSE_ERROR``,
  ``TARGETING_KEY_MISSING``), 400 ``PARSE_ERROR`` or ``INVALID_CONTEXT`` for a body that
  cannot be read. Errors carry OFREP's fields in Unleash's shape (``OfrepErrorBody``).
- ``POST /ofrep/v1/evaluate/flags``: every flag of the key (a frontend key's enabled ones
  only with ``disable_all_endpoint``, as ``/api/frontend``), failures listed among them;
  ETag and 304. A frontend key's answer names an ``eventStreams`` entry: ``GET
  /ofrep/v1/events``, whose URL holds the key (public; a client key is a secret, and a URL
  no place for one: server providers do not stream). A refetch the stream triggered names
  the revision it announced (``flagConfigEtag``): a worker not there yet waits for it,
  ``CATCH_UP`` seconds at most, rather than answering the flags from before the change.
- ``GET /ofrep/v1/events``: server-sent events, ``refetchEvaluation`` when the key's flags
  change (``id`` and ``etag``: the revision); at once when the client holds an older one
  (``Last-Event-ID``, else the URL's ``revision``). Bounded, kept alive and ended as
  ``/api/client/streaming`` (``stream_max``, ``stream_max_per_key``: 429 past them).

Every flag answered (not the failures) is counted for the context's ``appName`` in the
key's environment, as an SDK counts its evaluations: summed in this worker and written
through the ingest path every ``COUNT_EVERY`` seconds and at shutdown (relay mode: sent
upstream once, as SDKs' counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from datetime import UTC, datetime
from urllib.parse import quote

from aiohttp import web

from relay.api.auth import FRONTEND_KEYS, PRINCIPAL, SDK_KEYS, authorization
from relay.api.body import read_json
from relay.api.client_address import caller_address
from relay.api.client_features import fresh
from relay.api.connections import write_part
from relay.api.delta import revision
from relay.api.errors import (
    BadDataError,
    OfrepBadRequest,
    OfrepNotFound,
    OfrepUnavailable,
    TooManyRequests,
)
from relay.api.jobs import every
from relay.api.routing import Route
from relay.api.state import (
    EVALUATION_SOURCE,
    FRONTENDS,
    INGEST,
    SETTINGS,
    EvaluationSource,
)
from relay.api.streaming import EVENT_STREAM, STREAMS, follow
from relay.core import ofrep
from relay.core.catalog import Rendered
from relay.core.errors import DomainError, InvalidInput, StorageError, Throttled, Unavailable
from relay.core.evaluate import Context
from relay.core.frontend import Scoped
from relay.core.frontend_context import DEFAULT_APP
from relay.core.ingest_batch import hour_start
from relay.core.keys import Principal, hash_key
from relay.wire.common import ErrorDetail, KeyType
from relay.wire.ofrep import (
    BulkEvaluation,
    EvaluationRequest,
    EvaluationSuccess,
    OfrepErrorBody,
)

log = logging.getLogger(__name__)

OFREPS = web.AppKey("ofreps", ofrep.Ofreps)
TALLY = web.AppKey("ofrep_tally", ofrep.Tally)
COUNTS_DUE = web.AppKey("ofrep_counts_due", asyncio.Event)
"""Set when a key's share of the tally is full: the counts are written at once."""

COUNT_EVERY = 1.0
"""Seconds between two writes of the counts (an SDK posts its own every 15 to 60)."""
CATCH_UP = 3.0
"""Seconds a refetch naming a revision this worker has not reached waits for it."""
STREAM_RETRY = 10.0
"""Seconds a stream refused at a bound is told to wait (``Retry-After``)."""
EVENTS = "/ofrep/v1/events"


def api_key(request: web.Request) -> str:
    """OFREP's key: ``Authorization`` (bare or after ``Bearer``), else ``X-API-Key``."""
    return authorization(request) or request.headers.get("X-API-Key", "").strip()


def stream_key(request: web.Request) -> str:
    """The stream's key, in its URL: a browser's ``EventSource`` sends no headers."""
    return request.query.get("key", "")


async def _context(request: web.Request, flag: str | None = None) -> Context:
    """The body's context; a body that cannot be read is OFREP's ``PARSE_ERROR``, a
    context that cannot be evaluated its ``INVALID_CONTEXT``."""
    try:
        body = await read_json(request, EvaluationRequest)
    except BadDataError as exc:
        if not any((d.path or "").startswith("/body/context") for d in exc.details):
            raise OfrepBadRequest("PARSE_ERROR", exc.message, exc.details, flag) from None
        details = _context_details(exc.details)
        message = f"Invalid context: {details[0].message}"
        more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
        raise OfrepBadRequest("INVALID_CONTEXT", message + more, details, flag) from None
    return ofrep.context(body.context, caller_address(request), datetime.now(UTC))


_VALUE_KINDS = ("/constrained-str", "/int", "/float", "/bool")


def _context_details(details: list[ErrorDetail]) -> list[ErrorDetail]:
    """pydantic names each kind of value a context's value may be: one line per attribute
    that is none of them (a structure, most often) says it once."""
    found: dict[str, ErrorDetail] = {}
    for detail in details:
        path = detail.path or ""
        if path.endswith(_VALUE_KINDS):
            path = path.rsplit("/", 1)[0]
            message = (
                f"The `{path}` property must be a string, a number or a boolean: Unleash's"
                " constraints read no structure"
            )
            detail = ErrorDetail(path=path, message=message)
        found.setdefault(path, detail)
    return list(found.values())


def _scoped(request: web.Request, rendered: Rendered) -> tuple[Scoped, ofrep.Answers]:
    """The scope compiled (the Frontend API's cache), and its answers rendered."""
    scoped = request.app[FRONTENDS].scoped(rendered)
    return scoped, request.app[OFREPS].of(scoped)


def _count(request: web.Request, key: str, context: Context, answered: list[ofrep.Outcome]) -> None:
    """The answers counted for the context's app in the key's environment, in the key's
    share of the tally; a full share is written at once."""
    app, tally = context.app_name or DEFAULT_APP, request.app[TALLY]
    hour = hour_start(context.current_time)
    tally.add(hash_key(key), app, request[PRINCIPAL].environment, hour, answered)
    if tally.overflowing:
        request.app[COUNTS_DUE].set()


async def one(request: web.Request) -> web.Response:
    name, key = request.match_info["key"], api_key(request)
    context = await _context(request, name)
    source = request.app[EVALUATION_SOURCE]
    rendered = await _flags(source.flags(key, request[PRINCIPAL]), name)
    scoped, answers = _scoped(request, rendered)
    outcome = answers.one(scoped, context, name)
    if outcome is None:
        raise OfrepNotFound("FLAG_NOT_FOUND", f"Flag '{name}' was not found", key=name)
    if outcome.error is not None:
        code, details = outcome.error
        raise OfrepBadRequest(code, details, key=name)
    _count(request, key, context, [outcome])
    headers = {"Cache-Control": "no-cache"}
    return web.Response(body=outcome.fragment, content_type="application/json", headers=headers)


async def bulk(request: web.Request) -> web.Response:
    context = await _context(request)
    key, principal = api_key(request), request[PRINCIPAL]
    source = request.app[EVALUATION_SOURCE]
    named = request.query.get("flagConfigEtag")
    rendered = await _flags(_caught_up(source, key, principal, named))
    frontend = principal.type is KeyType.FRONTEND
    everything = not (frontend and request.app[SETTINGS].disable_all_endpoint)
    after = _streams(key, rendered.revision) if frontend else b""
    scoped, answers = _scoped(request, rendered)
    answer = answers.bulk(scoped, context, everything, after)
    _count(request, key, context, answer.answered)
    headers = {"ETag": answer.etag, "Cache-Control": "no-cache"}
    if fresh(request.headers.get("If-None-Match"), answer.etag):
        return web.Response(status=304, headers=headers)
    return web.Response(body=answer.body, content_type="application/json", headers=headers)


async def _flags(found: Awaitable[Rendered], flag: str | None = None) -> Rendered:
    """The key's flags, or OpenFeature's ``GENERAL`` when they cannot be had (a relay
    without a copy while its upstream is down); a 429 stays one (its ``Retry-After``)."""
    try:
        return await found
    except Throttled:
        raise
    except Unavailable as exc:
        raise OfrepUnavailable("GENERAL", exc.message, key=flag) from None


def _streams(key: str, at: int) -> bytes:
    """The ``eventStreams`` member: on the origin the provider calls (``endpoint``, so a
    proxy in front needs no setting), the key and the revision answered in the URL."""
    uri = f"{EVENTS}?key={quote(key, safe='')}&revision={at}"
    return b'"eventStreams":[{"type":"sse","endpoint":{"requestUri":"%s"}}]' % uri.encode()


async def _caught_up(
    source: EvaluationSource, key: str, principal: Principal, named: str | None
) -> Rendered:
    """The key's flags, at the revision ``named`` at least (within ``CATCH_UP``): the
    stream that announced it may be another worker's, or another instance's."""
    rendered = await source.flags(key, principal)
    wanted = revision(named)
    deadline = time.monotonic() + CATCH_UP
    while wanted is not None and rendered.revision < wanted:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(source.next_change(), left)
        rendered = await source.flags(key, principal)
    return rendered


async def events(request: web.Request) -> web.StreamResponse:
    key, principal = stream_key(request), request[PRINCIPAL]
    source, settings = request.app[EVALUATION_SOURCE], request.app[SETTINGS]
    streams = request.app[STREAMS]
    at = (await source.flags(key, principal)).revision  # refused (403, 503) before it opens
    held = revision(request.headers.get("Last-Event-ID"))
    if held is None:
        held = revision(request.query.get("revision"))
    client = hash_key(key)
    end = streams.open(client, request, settings.stream_max, settings.stream_max_per_key)
    if isinstance(end, str):
        raise TooManyRequests(f"Too many streams (bound: {end}): try again later", STREAM_RETRY)
    response = web.StreamResponse(headers=EVENT_STREAM)
    try:
        await response.prepare(request)
        if request.method == "HEAD":
            return response
        opening = b": connected\n\n"
        if held is not None and held != at:
            opening += ofrep.stream_event(at)  # a change the client has not fetched yet
        await write_part(request, response, opening)

        async def changed() -> tuple[bytes, ...]:
            nonlocal at
            now = (await source.flags(key, principal)).revision
            if now == at:
                return ()
            at = now
            return (ofrep.stream_event(at),)

        await follow(request, response, end, key, source.next_change, changed)
    except ConnectionResetError:
        pass  # the client went away, or read nothing within write_timeout
    except DomainError:
        pass  # a relay's upstream refused the key meanwhile: the reconnect is told why
    finally:
        streams.closed(client, end)
    return response


class _Counting:
    """Writes the tally; says once when writing fails, and once when it works again."""

    def __init__(self, app: web.Application) -> None:
        self._app = app
        self._failing = False

    async def write(self) -> None:
        self._app[COUNTS_DUE].clear()
        tally = self._app[TALLY]
        taken = tally.take()
        if not taken:
            return
        try:
            await self._app[INGEST].evaluated(taken)
        except InvalidInput as exc:  # never retried: it would fail again
            ofrep.DROPPED.inc(sum(c.yes + c.no for c in taken.values()))
            log.error("OFREP counts refused and dropped", extra={"error": str(exc)})
        except (DomainError, StorageError) as exc:
            tally.put_back(taken)
            if not self._failing:
                message = "OFREP counts not written: kept for the next try"
                log.warning(message, extra={"error": str(exc)})
            self._failing = True
        else:
            if self._failing:
                log.info("OFREP counts written again")
            self._failing = False


async def counting(app: web.Application) -> AsyncIterator[None]:
    """The tally written every ``COUNT_EVERY`` seconds and once more as the worker stops,
    after its last requests: a mode's wiring appends this after the context that opens
    its storage, so that it ends before that one closes it."""
    writer = _Counting(app)
    periodic = every(COUNT_EVERY, writer.write, "ofrep-counts", app[COUNTS_DUE])(app)
    await anext(periodic)
    yield
    with contextlib.suppress(StopAsyncIteration):
        await anext(periodic)
    await writer.write()


def add_ofrep(app: web.Application, source: EvaluationSource) -> None:
    """OFREP's state; its ``counting`` is the wiring's to place (see there)."""
    app[EVALUATION_SOURCE] = source
    app[OFREPS] = ofrep.Ofreps()
    app[TALLY] = ofrep.Tally()
    app[COUNTS_DUE] = asyncio.Event()


_ERRORS = (400, 408, 413, 415, 503)  # 503: OpenFeature's GENERAL

ROUTES = [
    Route(
        "POST",
        "/ofrep/v1/evaluate/flags/{key}",
        one,
        "OpenFeature (OFREP): one flag of the key, evaluated for the context",
        "ofrep",
        auth=SDK_KEYS,
        body=EvaluationRequest,
        responses={200: EvaluationSuccess},
        errors=(404, *_ERRORS),
        operation="ofrepEvaluateFlag",
        key_from=api_key,
        error_body=OfrepErrorBody,
    ),
    Route(
        "POST",
        "/ofrep/v1/evaluate/flags",
        bulk,
        "OpenFeature (OFREP): every flag of the key, evaluated for the context; ETag, 304",
        "ofrep",
        auth=SDK_KEYS,
        body=EvaluationRequest,
        responses={200: BulkEvaluation, 304: None},
        errors=_ERRORS,
        operation="ofrepEvaluateFlagsBulk",
        key_from=api_key,
        error_body=OfrepErrorBody,
    ),
    Route(
        "GET",
        EVENTS,
        events,
        "OpenFeature (OFREP): server-sent events naming each change of a frontend key's"
        " flags (refetchEvaluation); the key in the query (key=), as the bulk answer's"
        " eventStreams give it",
        "ofrep",
        auth=FRONTEND_KEYS,
        responses={200: None},
        errors=(503,),
        operation="ofrepEvents",
        key_from=stream_key,
    ),
]
