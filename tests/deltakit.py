"""The delta protocol as its tests read it: an answer's events and their names, and a
replay of them that must agree with a fresh hydration."""

from __future__ import annotations

from typing import Any

from conftest import DEV_KEY, auth

from relay.wire.delta import ClientFeaturesDelta

DELTA = "/api/client/delta"


async def delta(
    client: Any, etag: str | None = None, key: str = DEV_KEY, query: str = ""
) -> tuple[int, list[dict[str, Any]], str | None]:
    headers = {**auth(key), "Unleash-Client-Spec": "5.2.0"}
    if etag is not None:
        headers["If-None-Match"] = etag
    response = await client.get(DELTA + query, headers=headers)
    if response.status != 200:
        return response.status, [], response.headers.get("ETag")
    body = await response.json()
    ClientFeaturesDelta.model_validate(body)  # the documented schema, exactly
    return 200, body["events"], response.headers["ETag"]


def names(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (e["type"], e.get("feature", {}).get("name") or e.get("featureName") or "") for e in events
    ]


Held = tuple[dict[str, Any], dict[int, Any]]


def replay(state: Held, events: list[dict[str, Any]]) -> Held:
    """As the SDKs apply events (unleash-client's repository, Yggdrasil)."""
    features, segments = dict(state[0]), dict(state[1])
    for event in events:
        match event["type"]:
            case "hydration":
                features = {f["name"]: f for f in event["features"]}
                segments = {s["id"]: s for s in event["segments"]}
            case "feature-updated":
                features[event["feature"]["name"]] = event["feature"]
            case "feature-removed":
                features.pop(event["featureName"], None)
            case "segment-updated":
                segments[event["segment"]["id"]] = event["segment"]
            case "segment-removed":
                segments.pop(event["segmentId"], None)
    return features, segments


def agrees(got: Held, want: Held) -> bool:
    used = {i for f in want[0].values() for s in f["strategies"] for i in s.get("segments", ())}
    return got[0] == want[0] and all(got[1].get(i) == want[1][i] for i in used)
