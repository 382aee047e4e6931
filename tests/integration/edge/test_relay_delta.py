"""Delta and streaming at a relay, from its flag cache: each new copy of the upstream's
answer is compared with the one held and becomes events at the scope's next revision. A real
app on a real socket, a real SQLite file, the fake upstream on another socket; and the
revisions of copies (``relay.edge.flags.revisions``) as other workers and restarts see them."""

from __future__ import annotations

import asyncio
import itertools
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY, MakeClient
from fake_upstream import FakeUpstream
from followkit import FLAGS, delta, with_checkout
from service import eventually
from streamkit import memory_per_stream

from relay.api.state import DELTA_SOURCE
from relay.core.catalog import Scope
from relay.core.client_features import Rendered
from relay.core.delta import FLAG, Change, Changes
from relay.core.keys import parse_key
from relay.edge.flags import revisions
from relay.edge.flags.revisions import moved
from relay.wire.common import KeyType

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)


async def test_a_change_upstream_is_events_since_the_revision_a_client_holds(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features = FLAGS
    relay = await make_relay(features_refresh_interval=0.1)
    status, body, etag = await delta(relay)
    assert status == 200
    [hydration] = body["events"]
    assert hydration["type"] == "hydration"
    assert [f["name"] for f in hydration["features"]] == ["a.checkout", "b.search"]
    assert (await delta(relay, etag))[0] == 304
    upstream.features, upstream.features_etag = with_checkout(False), '"v2"'

    async def changed() -> bool:
        return (await delta(relay, etag))[0] == 200

    await eventually(changed, "the change as events")
    status, body, after = await delta(relay, etag)
    [updated] = body["events"]
    assert updated["type"] == "feature-updated"
    assert updated["feature"]["name"] == "a.checkout"
    assert updated["feature"]["enabled"] is False
    assert int(after.strip('"')) == int(etag.strip('"')) + 1
    assert (await delta(relay, etag, "?namePrefix=b."))[0] == 304  # nothing it sees changed
    upstream.features, upstream.features_etag = {**FLAGS, "features": []}, '"v3"'
    await eventually(lambda: changed_since(relay, after), "the removals")
    body = (await delta(relay, after))[1]
    assert [(e["type"], e["featureName"]) for e in body["events"]] == [
        ("feature-removed", "a.checkout"),
        ("feature-removed", "b.search"),
    ]
    assert (await delta(relay, '"1"'))[1]["events"][0]["type"] == "hydration"  # not held


async def changed_since(relay: Any, etag: str) -> bool:
    return (await delta(relay, etag))[0] == 200


async def test_a_stream_gets_each_change_of_its_scope(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    upstream.features = FLAGS
    relay = await make_relay(features_refresh_interval=0.1)
    response = await relay.get("/api/client/streaming", headers={"Authorization": DEV_KEY})
    assert response.status == 200
    assert await response.content.readline() == b"event: unleash-connected\n"
    connected = await _message(response)
    upstream.features, upstream.features_etag = with_checkout(False), '"v2"'
    assert await asyncio.wait_for(response.content.readline(), 10) == b"event: unleash-updated\n"
    updated = await _message(response)
    assert int(updated["id"]) == int(connected["id"]) + 1
    [event] = json.loads(updated["data"])["events"]
    assert (event["type"], event["feature"]["enabled"]) == ("feature-updated", False)
    response.close()


async def _message(response: Any) -> dict[str, str]:
    fields = {}
    while line := (await response.content.readline()).rstrip(b"\n"):
        name, _, value = line.decode().partition(": ")
        fields[name] = value
    return fields


async def test_a_restarted_relay_resumes_at_the_revision_it_kept(
    make_relay: MakeClient, upstream: FakeUpstream, tmp_path: Path
) -> None:
    upstream.features = FLAGS
    relay = await make_relay()
    etag = (await delta(relay))[2]
    await relay.close()
    with sqlite3.connect(tmp_path / "relay" / "cache.db") as conn:
        kept = {row[0] for row in conn.execute("SELECT revision FROM flag_scopes")}
    assert str(max(kept)) == etag.strip('"')
    again = await make_relay()
    assert (await delta(again, etag))[0] == 304  # resumed: nothing changed since


def rendered(answer: dict[str, Any]) -> Rendered:
    return Rendered(json.dumps(answer).encode(), '"x"', 0)


def test_revisions_of_copies_fetched_and_loaded() -> None:
    """A worker's revisions: a first copy at the clock, one more per change fetched, the
    same for a copy that changed nothing; another worker's copy at its stored revision;
    a copy at a revision this worker holds with other flags moves past it, hydrating."""
    on, off = rendered(FLAGS), rendered(with_checkout(False))
    before = revisions.first()
    start = moved(Changes(0, 0), None, on, None)
    assert before <= start.revision <= revisions.first() and start.changes == ()
    assert moved(start, on, on, None) is start
    fetched = moved(start, on, off, None)
    assert fetched.revision == start.revision + 1
    assert fetched.changes == (Change(fetched.revision, FLAG, "a.checkout", ("default",)),)
    assert fetched.holds(start.revision)
    loaded = moved(start, on, off, start.revision + 5)  # another worker's, further on
    assert loaded.revision == start.revision + 5 and loaded.holds(start.revision)
    assert moved(fetched, off, off, fetched.revision) is fetched  # its own, written back
    assert moved(fetched, off, off, start.revision) is fetched  # behind, the same flags
    ahead = moved(fetched, off, off, fetched.revision + 3)  # the same flags, moved past a clash
    assert ahead.revision == fetched.revision + 3 and ahead.holds(fetched.revision)
    assert ahead.since(fetched.revision) == ()
    # another worker gave this revision other flags: past both, every client hydrated
    clash = moved(fetched, off, on, fetched.revision)
    assert clash.revision == fetched.revision + 1 and not clash.holds(fetched.revision)
    assert moved(fetched, off, on, 0).revision >= before  # a row from before revisions


def test_what_changed_is_kept_within_its_bound() -> None:
    answers = [rendered(with_checkout(i % 2 == 0)) for i in range(4)]
    held = moved(Changes(0, 0), None, answers[0], None)
    for before, after in itertools.pairwise(answers):
        held = moved(held, before, after, None, most=1)
    assert len(held.changes) == 1 and held.holds(held.revision - 1)
    assert not held.holds(held.revision - 2)


async def test_a_delta_is_put_together_once_for_every_client_that_asks(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """Streams woken by a change ask for the same delta: one is put together for all (a
    made-up revision is a hydration, the same one)."""
    upstream.features = FLAGS
    relay = await make_relay()
    source = relay.server.app[DELTA_SOURCE]
    principal = parse_key(DEV_KEY, KeyType.CLIENT).principal
    scope = Scope("development", None, None, False)
    first = await source.for_key(DEV_KEY, principal).delta(scope, None)
    assert await source.for_key(DEV_KEY, principal).delta(scope, None) is first
    assert await source.for_key(DEV_KEY, principal).delta(scope, 12345) is first


async def test_memory_per_stream_at_a_relay_is_bounded(
    make_relay: MakeClient, upstream: FakeUpstream
) -> None:
    """What an open stream holds in a relay's worker, measured as the standalone's
    (``test_streaming.py``) over 300 streams from its copy; the figure is printed."""
    upstream.features = FLAGS
    relay = await make_relay(client_tokens=[DEV_KEY])
    assert (await delta(relay))[0] == 200  # the copy held: streams wait on it
    held = await memory_per_stream(relay, DEV_KEY)
    print(f"memory per stream at a relay: {held / 1024:.1f} KiB")
    assert held < 64 * 1024
