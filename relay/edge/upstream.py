"""Every call to the central service goes through ``UpstreamClient``: one session, one base
URL, no redirects followed (a redirect could carry keys to another host), and each answer
reduced to a small closed set of outcomes that callers match on."""

from __future__ import annotations

import enum
import ipaddress
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Annotated

import aiohttp
from aiohttp import web
from aiohttp.helpers import get_env_proxy_for_url
from prometheus_client import Histogram
from pydantic import BaseModel, Field, ValidationError
from yarl import URL

from relay.core.keys import Principal, redact
from relay.wire.common import KeyType, empty
from relay.wire.validate import ValidateKeys

# The most of an upstream's answer read, decoded: flags for thousands of features fit; a
# larger answer (or a gzip bomb) is an error, and what the relay holds stays.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
READ_CHUNK = 64 * 1024

UPSTREAM_LATENCY = Histogram(
    "relay_upstream_request_duration_seconds",
    "Latency of calls to the upstream, by operation and outcome",
    ["operation", "outcome"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)


class Outcome(enum.StrEnum):
    OK = "ok"
    TOO_LARGE = "too_large"  # 413: split and retry
    REJECTED = "rejected"  # other 4xx: this batch will never be accepted
    MISCONFIGURED = "misconfigured"  # 401/403/404 or a redirect: wrong key or URL, back off long
    RETRY = "retry"  # 429, 5xx, timeout, connection error: back off and retry


@dataclass(frozen=True, slots=True)
class SendResult:
    outcome: Outcome
    status: int | None
    detail: str
    retry_after: float | None = None


class UpstreamUnavailable(Exception):
    """The upstream could not be reached or did not answer in time, or (``retry_after`` set)
    asked to be called less (429)."""

    def __init__(self, message: str, timed_out: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class Forwarded:
    status: int
    body: bytes
    headers: Mapping[str, str]


class _ValidatedKey(BaseModel):
    token: str
    # Unleash's types in any case, ``backend`` for client; other types are kept as strings
    type: Annotated[KeyType | str, Field(union_mode="left_to_right")]
    projects: list[str] = empty(list)
    environment: str | None = None  # Unleash leaves it out: it is in the key itself


class _ValidatedKeys(BaseModel):
    tokens: list[_ValidatedKey]


FLUSH_CONNECTIONS = 2  # the flusher sends one batch at a time


def environment_proxy(base_url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
    """The HTTP proxy ``HTTP_PROXY``/``HTTPS_PROXY`` name for the upstream (``NO_PROXY``
    honoured), read once at start, as Unleash Edge and the Unleash Proxy honour them; none
    for an upstream on loopback, which no proxy elsewhere could reach. (aiohttp's
    ``trust_env`` would look them up on every request, and take ``~/.netrc`` credentials
    that clash with the keys relay sends in ``Authorization``.)"""
    url = URL(base_url)
    if url.host is None or url.host == "localhost" or _loopback(url.host):
        return None, None
    try:
        return get_env_proxy_for_url(url)
    except LookupError:
        return None, None


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class UpstreamClient:
    """Flushes have connections of their own: callers (key checks, pass-through calls) that
    take every other connection, or wait on a slow upstream, never delay them. So do the
    streams followed (``stream``): each holds its connection for as long as it lasts, and
    in the shared pool of 100, 100 scopes followed would leave none to fetches, checks or
    the other scopes' streams. Their pool has no limit: they are bounded by the scopes a
    worker holds (``relay.edge.flags.cache.MAX_SCOPES``)."""

    def __init__(self, base_url: str, timeout: float) -> None:
        self.base_url = base_url
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._proxy, self._proxy_auth = environment_proxy(base_url)
        self._session: aiohttp.ClientSession | None = None
        self._flush_session: aiohttp.ClientSession | None = None
        self._stream_session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        self._session = self._new_session(limit=100)
        self._flush_session = self._new_session(limit=FLUSH_CONNECTIONS)
        self._stream_session = self._new_session(limit=0)  # aiohttp's "no limit"

    def _new_session(self, limit: int) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=limit),
            proxy=self._proxy,
            proxy_auth=self._proxy_auth,
            timeout=self._timeout,
            headers={"User-Agent": "relay"},
            auto_decompress=True,
        )

    async def connected(self, app: web.Application) -> AsyncIterator[None]:
        """Its sessions open while the application serves (a ``cleanup_ctx``)."""
        try:
            await self.open()
            yield
        finally:
            await self.close()

    async def close(self) -> None:
        for session in (self._session, self._flush_session, self._stream_session):
            if session is not None:
                await session.close()
        self._session = self._flush_session = self._stream_session = None

    def _client(self, session: aiohttp.ClientSession | None) -> aiohttp.ClientSession:
        if session is None:
            raise UpstreamUnavailable("upstream client is closed", timed_out=False)
        return session

    async def send_bulk(self, key: str, body: bytes, idempotency_key: str) -> SendResult:
        headers = {
            "Authorization": key,
            "Content-Type": "application/json",
            "Idempotency-Key": idempotency_key,
        }
        started = time.perf_counter()
        result = await self._send_bulk(headers, body)
        UPSTREAM_LATENCY.labels("bulk", result.outcome.value).observe(time.perf_counter() - started)
        return result

    async def _send_bulk(self, headers: dict[str, str], body: bytes) -> SendResult:
        url = f"{self.base_url}/api/client/metrics/bulk"
        try:
            async with self._client(self._flush_session).post(
                url, data=body, headers=headers, allow_redirects=False
            ) as response:
                text = (await response.read())[:500].decode("utf-8", "replace")
                return _classify(response.status, text, response.headers.get("Retry-After"))
        except TimeoutError:
            return SendResult(Outcome.RETRY, None, "upstream timed out")
        except aiohttp.ClientError as exc:
            return SendResult(Outcome.RETRY, None, f"upstream unreachable: {exc}")

    async def validate(self, keys: list[str]) -> dict[str, Principal]:
        """Ask ``/edge/validate`` which keys are valid; raises UpstreamUnavailable."""
        response = await self.forward(
            "POST",
            "/edge/validate",
            {"Content-Type": "application/json"},
            ValidateKeys(tokens=keys).model_dump_json().encode(),
            "validate",
        )
        if response.status == 429:  # the relay's own budget of invalid keys there is spent
            wait = _retry_after(response.headers.get("Retry-After"))
            raise UpstreamUnavailable("key validation answered 429", False, wait or 1.0)
        if response.status != 200:
            raise UpstreamUnavailable(f"key validation answered {response.status}", timed_out=False)
        try:
            answer = _ValidatedKeys.model_validate_json(response.body)
        except ValidationError:
            raise UpstreamUnavailable("key validation answer is malformed", False) from None
        asked = set(keys)
        valid = {}
        for found in answer.tokens:
            if isinstance(kind := found.type, KeyType) and found.token in asked:
                environment = found.environment or _environment_of(found.token)
                valid[found.token] = Principal(
                    kind, environment, tuple(found.projects), redact(found.token)
                )
        return valid

    def stream(
        self, path: str, headers: Mapping[str, str], silence: float
    ) -> aiohttp.client._RequestContextManager:
        """A long-lived GET of ``{base_url}{path}`` (server-sent events), read as it comes:
        no bound on its length, ``silence`` seconds at most without a byte. Raises
        ``aiohttp.ClientError`` or ``TimeoutError`` as it is used."""
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self._timeout.total, sock_read=silence
        )
        return self._client(self._stream_session).get(
            f"{self.base_url}{path}", headers=headers, timeout=timeout, allow_redirects=False
        )

    async def forward(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes | None,
        operation: str,
    ) -> Forwarded:
        """One request to ``{base_url}{path}``; raises UpstreamUnavailable."""
        started = time.perf_counter()
        outcome = "error"
        try:
            async with self._client(self._session).request(
                method,
                f"{self.base_url}{path}",
                headers=headers,
                data=body,
                allow_redirects=False,
            ) as response:
                payload = await _read_capped(response)
                outcome = str(response.status)
                # a case-insensitive copy: aiohttp reads `ETag` as `Etag`, and a plain dict
                # would then lose it for the passthrough's `ETag` lookup
                return Forwarded(response.status, payload, response.headers.copy())
        except TimeoutError:
            outcome = "timeout"
            raise UpstreamUnavailable("upstream timed out", timed_out=True) from None
        except aiohttp.ClientError as exc:
            raise UpstreamUnavailable(f"upstream unreachable: {exc}", timed_out=False) from None
        finally:
            UPSTREAM_LATENCY.labels(operation, outcome).observe(time.perf_counter() - started)


async def _read_capped(response: aiohttp.ClientResponse) -> bytes:
    """The answer's body, at most ``MAX_ANSWER_BYTES`` once decoded."""
    if (response.content_length or 0) > MAX_ANSWER_BYTES:
        raise UpstreamUnavailable("upstream answer too large", timed_out=False)
    if response.content_length is not None and "Content-Encoding" not in response.headers:
        return await response.read()  # its length known and bounded: read whole, at once
    chunks, size = [], 0
    async for chunk in response.content.iter_chunked(READ_CHUNK):
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise UpstreamUnavailable("upstream answer too large", timed_out=False)
        chunks.append(chunk)
    return b"".join(chunks)


def _environment_of(key: str) -> str:
    """``project:environment.secret`` -> ``environment``; ``*`` if the key does not say."""
    head, dot, _ = key.partition(".")
    _, colon, environment = head.partition(":")
    return environment if dot and colon and environment else "*"


def _classify(status: int, text: str, retry_after: str | None) -> SendResult:
    if 200 <= status < 300:
        return SendResult(Outcome.OK, status, "")
    if status == 413:
        return SendResult(Outcome.TOO_LARGE, status, text)
    if status in (401, 403, 404) or 300 <= status < 400:
        # a redirect is never followed (it could carry the key elsewhere): the URL is wrong
        return SendResult(Outcome.MISCONFIGURED, status, text)
    if status == 429 or status >= 500:
        return SendResult(Outcome.RETRY, status, text, _retry_after(retry_after))
    return SendResult(Outcome.REJECTED, status, text)


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds or as an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None
