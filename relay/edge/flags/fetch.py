"""One fetch of a scope's flags from the upstream, reduced to what the flag cache does next.

The relay asks ``{upstream}/api/client/delta`` (the events since the last one it got,
applied to its copy), or when the upstream has none ``/api/client/features``, with a key of
the scope, no query (the relay filters locally) and ``Unleash-Client-Spec: UPSTREAM_SPEC``,
so segments come as ids and one answer serves SDKs of every version. Only the body and
the ETag are kept: no header of the upstream's reaches SDKs (its ``fetch-mode`` is for the
relay's own choice, ``relay.edge.flags.follow``).
"""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.core.client_features import Rendered, read
from relay.edge.upstream import UpstreamClient, UpstreamUnavailable

UPSTREAM_SPEC = "5.2.0"
MAX_ETAG = 1024
DELTA = "/api/client/delta"
NOT_OFFERED = 600.0  # an upstream without a delta or a stream: asked again this much later


class Fetch(enum.Enum):
    NEW = "new"  # 200
    SAME = "same"  # 304
    REFUSED = "refused"  # 401, 403
    FAILED = "failed"  # anything else, or no answer


@dataclass(frozen=True, slots=True)
class Fetched:
    outcome: Fetch
    status: int | None = None
    body: bytes = b""
    etag: str = ""
    error: str = ""


class Flags:
    """The upstream's flags as its events (streamed, or a delta polled) leave them."""

    def __init__(self, held: bytes | None = None) -> None:
        """From the copy ``held`` (which the events then change), or none."""
        answer = None if held is None else read(held)
        self.features: dict[str, Any] = {}
        self.segments: dict[int, Any] = {}
        self.revision = 0  # the upstream's: its last event's id, as its meta.revisionId
        if answer is not None:
            self.features = {f["name"]: f for f in answer.features}
            self.segments = dict(answer.segments)
            self.revision = answer.revision

    def apply(self, body: bytes | str) -> None:
        """The events of a delta answer or of a streamed event (``{"events": [...]}``).
        ``ValueError`` for a body of any other shape, however malformed: the one error its
        callers (a poll, a stream followed) take as the upstream's answer being unreadable.
        Events applied before one that is not are kept: a caller drops the copy then."""
        try:
            events = json.loads(body)["events"]
            if not isinstance(events, list):
                raise ValueError("no events")
            self._apply(events)
        except (KeyError, TypeError, RecursionError) as exc:
            raise ValueError(f"events of no known shape: {exc!r}") from exc

    def _apply(self, events: list[Any]) -> None:
        for event in events:
            if not isinstance(event, dict):
                raise ValueError("an event that is no object")
            if isinstance(event.get("eventId"), int):
                self.revision = max(self.revision, event["eventId"])
            match event["type"]:
                case "hydration":
                    self.features = {f["name"]: f for f in event["features"]}
                    self.segments = {s["id"]: s for s in event.get("segments", [])}
                case "feature-updated":
                    self.features[event["feature"]["name"]] = event["feature"]
                case "feature-removed":
                    self.features.pop(event["featureName"], None)
                case "segment-updated":
                    self.segments[event["segment"]["id"]] = event["segment"]
                case "segment-removed":
                    self.segments.pop(event["segmentId"], None)
                case _:
                    pass  # a kind of event this relay does not know: nothing it serves

    def answer(self) -> bytes:
        """As the client features answer has them."""
        answer = {"version": 2, "features": [*self.features.values()]}
        meta = {"revisionId": self.revision}
        return json.dumps({**answer, "segments": [*self.segments.values()], "meta": meta}).encode()


@dataclass(slots=True)
class DeltaPoll:
    """Polling a scope by ``/api/client/delta``: until when (monotonic) it is not asked,
    the upstream having none. The revision asked from is the copy's ETag: a copy taken
    from another worker is asked from where it is (a copy of the client features answer,
    or of a stream, has an ETag the upstream reads as none: a hydration)."""

    not_before: float = 0.0


class Fetcher:
    def __init__(self, upstream: UpstreamClient, identity: Mapping[str, str]) -> None:
        """``identity``: headers naming the relay (``Unleash-AppName``...)."""
        self.upstream, self.identity = upstream, identity
        self._headers = {"Accept": "application/json", "Unleash-Client-Spec": UPSTREAM_SPEC}
        self._headers.update(identity)

    async def fetch(
        self, key: str, etag: str | None, copy: Rendered | None, poll: DeltaPoll
    ) -> Fetched:
        """By ``/api/client/delta`` when the upstream offers it (the events applied to the
        ``copy`` held, if any; its upstream ``etag``), else by ``/api/client/features``;
        timed in ``relay_upstream_request_duration_seconds{operation="features"}``."""
        held = None if copy is None else copy.body
        etag = etag if copy is not None else None
        if time.monotonic() >= poll.not_before:
            fetched = await self._delta(key, held, etag, poll)
            if fetched is not None:
                return fetched
        headers = {**self._headers, "Authorization": key}
        if etag:
            headers["If-None-Match"] = etag
        try:
            got = await self.upstream.forward(
                "GET", "/api/client/features", headers, None, "features"
            )
        except UpstreamUnavailable as exc:
            return Fetched(Fetch.FAILED, error=str(exc))
        if got.status == 200:
            return Fetched(Fetch.NEW, 200, got.body, _etag(got.headers.get("ETag", "")))
        if got.status == 304 and etag:
            return Fetched(Fetch.SAME, 304)
        if got.status in (401, 403):
            return Fetched(Fetch.REFUSED, got.status)
        return Fetched(Fetch.FAILED, got.status, error=f"the upstream answered {got.status}")

    async def _delta(
        self, key: str, held: bytes | None, etag: str | None, poll: DeltaPoll
    ) -> Fetched | None:
        """None when the upstream has no delta (asked again after ``NOT_OFFERED``)."""
        headers = {**self._headers, "Authorization": key}
        if held is not None and etag:
            headers["If-None-Match"] = etag
        try:
            got = await self.upstream.forward("GET", DELTA, headers, None, "features")
        except UpstreamUnavailable as exc:
            return Fetched(Fetch.FAILED, error=str(exc))
        if got.status == 304 and "If-None-Match" in headers:
            return Fetched(Fetch.SAME, 304)
        if got.status in (401, 403):
            return Fetched(Fetch.REFUSED, got.status)
        if got.status == 200:
            try:
                flags = Flags(held if "If-None-Match" in headers else None)
                flags.apply(got.body)
            except ValueError:
                pass  # not a delta we can read: as if none
            else:
                return Fetched(Fetch.NEW, 200, flags.answer(), _etag(got.headers.get("ETag", "")))
        elif got.status not in (404, 405, 501):
            return Fetched(Fetch.FAILED, got.status, error=f"the upstream answered {got.status}")
        poll.not_before = time.monotonic() + NOT_OFFERED
        return None


def _etag(etag: str) -> str:
    """The upstream's ETag if it can be one (printable ASCII, as RFC 9110 has it, and short
    enough to store and send back); else none, and each refresh is a full answer."""
    return etag if len(etag) <= MAX_ETAG and etag.isascii() and etag.isprintable() else ""
