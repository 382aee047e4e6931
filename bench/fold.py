"""The fold of the central service's ingest log, alone: what one pass costs per count.

    python bench/fold.py                      # PostgreSQL (the machine's cluster) and SQLite
    python bench/fold.py --rows 400 --smoke

Appends ``--rows`` log rows, each the reference bulk body's 20 counts (100 entries over 20
flags and 5 apps), then times one fold (``Folder.caught_up``) of all of them, in two cases:
``shared`` (every row the same 20 keys: relays of one fleet) and ``distinct`` (every row
its own 20 keys: nothing to merge). Printed per case: counts folded/s, µs per count (the
fold's wall time, this process's CPU and, on PostgreSQL, the backends' CPU), and µs per
distinct key written. What the fold of one instance takes is the ceiling of the ingest of
all of them: one pass runs at a time across the instances on a database.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from pg_scale import PgSample, pg_sample
from servers import pg

from relay.core.ingest_batch import IngestBatch, MetricKey
from relay.store import ingest_log
from relay.store.fold import Folder
from relay.store.postgres import PostgresDatabase
from relay.store.sql import CENTRAL_SCHEMA, Database
from relay.store.sqlite import SqliteDatabase

KEYS_PER_ROW = 20
HOUR = 3600 * 490_000


def row_of(number: int, distinct: bool) -> str:
    """A log row as a group commit of the reference body appends it."""
    batch = IngestBatch()
    app = f"web-service-{number}" if distinct else "web-service"
    for i in range(KEYS_PER_ROW):
        variants = {"blue": 5 + i, "green": 7} if i % 4 == 0 else {}
        key = MetricKey(f"{app}-{i % 5}", "development", f"new-checkout-{i:02d}", HOUR)
        batch.add_count(key, 17 + i, 3, variants)
    return ingest_log.encode(batch)


async def one_case(db: Database, rows: int, distinct: bool, database: str | None) -> None:
    texts = [row_of(n, distinct) for n in range(rows)]
    async with db.transaction() as tx:
        for text in texts:
            await ingest_log.append(tx, text, time.time())
    folder = Folder(db, 1000)
    before: PgSample | None = await pg_sample(pg.ADMIN_URL, database) if database else None
    cpu, began = time.process_time(), time.perf_counter()
    await folder.caught_up()
    elapsed, cpu = time.perf_counter() - began, time.process_time() - cpu
    after = await pg_sample(pg.ADMIN_URL, database) if database else None
    counts = rows * KEYS_PER_ROW
    keys = counts if distinct else KEYS_PER_ROW
    row = {
        "scenario": "fold of the ingest log",
        "backend": "postgres" if database else "sqlite",
        "keys": "distinct" if distinct else "shared",
        "log_rows": rows,
        "counts": counts,
        "distinct_keys": keys,
        "counts_per_s": round(counts / elapsed),
        "wall_us_per_count": round(elapsed / counts * 1e6, 2),
        "process_cpu_us_per_count": round(cpu / counts * 1e6, 2),
        "wall_us_per_key_written": round(elapsed / keys * 1e6, 1),
    }
    if before and after:
        backend = after.cpu["backend"] - before.cpu["backend"]
        row["pg_backend_us_per_count"] = round(backend / counts * 1e6, 2)
        row["pg_backend_us_per_key_written"] = round(backend / keys * 1e6, 1)
    print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=2000, help="log rows of 20 counts each")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.rows = 20
    problem = pg.ensure_server()
    if problem:
        raise SystemExit(f"no PostgreSQL: {problem}")
    asyncio.run(cases(args.rows))


async def cases(rows: int) -> None:
    for distinct in (False, True):
        database = await pg.create_database()
        db = PostgresDatabase(pg.url_of(database), CENTRAL_SCHEMA)
        await db.open()
        try:
            await one_case(db, rows, distinct, database)
        finally:
            await db.close()
            await pg.drop_database(database)
        with tempfile.TemporaryDirectory(prefix="relay-bench-fold-") as tmp:
            sqlite = SqliteDatabase(Path(tmp) / "relay.db", CENTRAL_SCHEMA)
            await sqlite.open()
            try:
                await one_case(sqlite, rows, distinct, None)
            finally:
                await sqlite.close()


if __name__ == "__main__":
    main()
