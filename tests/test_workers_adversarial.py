"""An adversarial review of issue 32 (a relay decides as one, however many workers): each test
is a way found to make the workers, or the relay, go back on what it already said."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest
from conftest import MakeClient, auth
from fake_upstream import FakeUpstream
from service import eventually

from relay.core.keys import hash_key

pytestmark = pytest.mark.workers  # at one worker and at two (conftest.make_relay)

UP_KEY = "default:development.upstream-only-secret-0123456789"


def refused_in(relay_dir: Path, key: str) -> bool:
    """The relay stored the upstream's refusal of ``key`` (``relay.edge.key_words``)."""
    with sqlite3.connect(relay_dir / "cache.db") as db:
        row = db.execute(
            "SELECT status FROM key_words WHERE key_hash = ?", (hash_key(key),)
        ).fetchone()
    return row is not None and row[0] != 200


async def test_a_key_refused_after_the_clock_was_set_back_is_refused(
    make_relay: MakeClient,
    upstream: FakeUpstream,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The wall clock stepped back (NTP correcting a clock that ran ahead): the upstream's
    refusal of a key it vouched for before the step is the latest word on it, and refuses
    it, although its time reads earlier (before: the word vouching for it, "said later",
    stood, and the relay served the revoked key until the clock caught up)."""
    upstream.valid_keys[UP_KEY] = "development"
    relay = await make_relay(client_tokens=[], features_refresh_interval=0.2)
    for _ in range(4):
        assert (await relay.get("/api/client/features", headers=auth(UP_KEY))).status == 200
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() - 600)
    del upstream.valid_keys[UP_KEY]  # revoked: the next refresh of its flags is refused
    await eventually(lambda: refused_in(tmp_path / "relay", UP_KEY))  # the upstream's word
    statuses = [
        (await relay.get("/api/client/features", headers=auth(UP_KEY))).status for _ in range(6)
    ]
    assert statuses == [401] * 6
