"""What a relay's buffer file set aside: its dead letters."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


def dead_letters(data_dir: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(data_dir / "buffer.db") as conn:
        return list(conn.execute("SELECT status, entries, reason FROM dead_letters"))
