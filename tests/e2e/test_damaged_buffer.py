"""Issue 13, item 5: a damaged or missing buffer file is noticed at start, said so in the
log and counted; what SQLite can still read of it is salvaged and flushed.

Real processes on real files: the relay is stopped, its file damaged as a disk or an
operator would, and started again.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from pathlib import Path
from typing import Any

from conftest import DEV_KEY, auth, bulk
from fake_upstream import FakeUpstream
from faultkit import ADMIN, CENTRAL_ENV, CLIENT, entries, relay_env
from service import drained, free_port, post_bulk, running, scrape, start, stored

from relay.store.salvage import _salvage
from relay.store.sql import BUFFER_SCHEMA
from relay.store.sqlite import SqliteDatabase

UNREACHABLE = "http://127.0.0.1:9"  # nothing is flushed while the relay fills
HEALTH = "/health"  # without its upstream, a relay has no flags and is not ready


def fill(workdir: Path, data_dir: Path, batches: int = 10) -> int:
    """Start a relay that cannot flush, post ``batches`` x 500 entries, stop it cleanly."""
    env = relay_env(UNREACHABLE, RELAY_DATA_DIR=str(data_dir), RELAY_FINAL_FLUSH_TIMEOUT="1")
    relay = start(workdir, env=env, wait_for=HEALTH)
    for batch in range(batches):
        assert post_bulk(relay.url, CLIENT, entries(batch))[0] == 202
    assert relay.stop() == 0
    return batches * 500


def damaged_gauge(url: str) -> float:
    return scrape(url, "relay_buffer_damaged_files")


def test_a_buffer_truncated_to_nothing_is_an_error_not_a_fresh_start(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fill(tmp_path / "relay", data)
    os.truncate(data / "buffer.db", 0)
    env = relay_env(UNREACHABLE, RELAY_DATA_DIR=str(data))
    with running(tmp_path / "relay", env=env, wait_for=HEALTH) as relay:
        assert post_bulk(relay.url, CLIENT, entries(99, 10))[0] == 202  # it works on a new file
        assert damaged_gauge(relay.url) == 1
    log = relay.logs()
    assert "buffer file damaged" in log and "the file is empty" in log
    assert len(list(data.glob("buffer.db.damaged-*"))) == 1


def test_a_missing_buffer_next_to_its_instance_id_is_an_error(tmp_path: Path) -> None:
    data = tmp_path / "data"
    fill(tmp_path / "relay", data)
    (data / "buffer.db").unlink()
    env = relay_env(UNREACHABLE, RELAY_DATA_DIR=str(data))
    with running(tmp_path / "relay", env=env, wait_for=HEALTH) as relay:
        assert post_bulk(relay.url, CLIENT, entries(99, 10))[0] == 202
    assert "buffer file missing although this relay ran here before" in relay.logs()


def middle_leaf(buffer: Path) -> tuple[int, set[int]]:
    """The middle leaf page of the table holding most of the counts (the outbox, one batch
    a leaf; or the counts themselves, each of this test's rows one count), and what losing
    it may cost. Chosen, not drawn: a random page can be free (nothing to find) or a
    table's root (everything behind it lost)."""
    with sqlite3.connect(buffer) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the pages are in the main file
        leaves = {
            table: conn.execute(
                "SELECT pageno, ncell FROM dbstat WHERE name = ? AND pagetype = 'leaf'"
                " ORDER BY pageno",
                (table,),
            ).fetchall()
            for table in ("outbox", "metrics")
        }
        batches = {int(n) for (n,) in conn.execute("SELECT entries FROM outbox")}
    table = max(leaves, key=lambda name: len(leaves[name]))
    assert len(leaves[table]) > 2, leaves
    pageno, cells = leaves[table][len(leaves[table]) // 2]
    return int(pageno), batches if table == "outbox" else {int(cells)}


def test_a_damaged_page_is_found_at_start_and_the_rest_is_salvaged(tmp_path: Path) -> None:
    data = tmp_path / "data"
    posted = fill(tmp_path / "relay", data, batches=20)
    buffer = data / "buffer.db"
    page = 4096
    pageno, losses = middle_leaf(buffer)
    with buffer.open("r+b") as file:  # one leaf page overwritten with fixed bytes
        file.seek((pageno - 1) * page)
        file.write(b"\xa5" * page)
    with running(tmp_path / "central", env=CENTRAL_ENV) as central:
        port = free_port()
        env = relay_env(central.url, RELAY_DATA_DIR=str(data))
        relay = start(tmp_path / "relay", env=env, port=port)
        try:
            assert damaged_gauge(relay.url) == 1
            drained(central, ADMIN, relay, CLIENT)
            delivered = stored(central.url, ADMIN, "disk")
        finally:
            assert relay.stop(signal.SIGTERM) == 0
    log = relay.logs()
    assert "buffer file damaged" in log and "salvaged from the damaged buffer file" in log
    # what was on the damaged leaf is lost, everything else is delivered, nothing twice
    assert posted - delivered in losses, (delivered, posted, losses)


async def test_an_instance_id_file_that_is_no_valid_id_is_replaced(
    make_relay: Any, upstream: FakeUpstream, tmp_path: Path
) -> None:
    """An empty id would make every registration's connectVia one the upstream refuses."""
    data = tmp_path / "relay"
    data.mkdir()
    (data / "instance-id").write_text("\n")
    client = await make_relay(instance_id=None, flush_interval=3600)
    registration = {"appName": "app", "environment": "development", "instanceId": "i1"}
    response = await client.post(
        "/api/client/metrics/bulk", json=bulk(applications=[registration]), headers=auth(DEV_KEY)
    )
    assert response.status == 202
    await client.close()
    [app] = upstream.accepted_bulks()[0].json()["applications"]
    generated = (data / "instance-id").read_text().strip()
    assert generated.startswith("relay-")
    assert app["connectVia"] == [{"appName": "relay", "instanceId": generated}]


async def test_impact_series_are_salvaged_with_the_counts(tmp_path: Path) -> None:
    """Every table of the buffer is read back from a damaged file, impact series too."""
    damaged, fresh = tmp_path / "damaged.db", tmp_path / "buffer.db"
    for path in (damaged, fresh):
        db = SqliteDatabase(path, BUFFER_SCHEMA)
        await db.open()
        await db.close()
    row = ("s1", "development", "shop", "checkouts", "counter", "{}", "help", '{"value":3}', 1.0)
    with sqlite3.connect(damaged) as conn:
        conn.execute(f"INSERT INTO impact_metrics ({IMPACT_COLUMNS}) VALUES ({MARKS})", row)
    assert _salvage(damaged, fresh)["impact_metrics"] == 1
    with sqlite3.connect(fresh) as conn:
        assert conn.execute(f"SELECT {IMPACT_COLUMNS} FROM impact_metrics").fetchall() == [row]


IMPACT_COLUMNS = "series, environment, app_name, name, kind, labels, help, state, updated_at"
MARKS = ", ".join("?" * 9)
