"""A relay started from Unleash Edge's backup folder (``backup_folder``): with its upstream
unreachable, SDKs get the backed-up flags at once, with the keys Edge had validated, and
only those. The real program in a subprocess, the real Python SDK."""

from __future__ import annotations

import json
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from conftest import DEV_KEY
from sdks import Check, python_evaluate, quiet_sdk_logs
from service import free_port, get_json, running

pytestmark = pytest.mark.process

BACKED_UP = "default:development.known-only-from-the-backup-0123456789"
INVALID = "default:development.edge-found-this-invalid-0123456789"
FORGED = "default:production.says-development-in-the-file-0123456789"

FEATURES = {
    "version": 2,
    "features": [
        {
            "name": "from-backup",
            "enabled": True,
            "project": "default",
            "strategies": [{"name": "default", "parameters": {}, "constraints": []}],
        },
        {"name": "backup-off", "enabled": False, "project": "default", "strategies": []},
    ],
}


def token(key: str, status: str = "Validated", environment: str = "development") -> Any:
    return {
        "token": key,
        "type": "client",
        "environment": environment,
        "projects": ["default"],
        "status": status,
    }


def edge_backup(folder: Path) -> Path:
    """Files as Unleash Edge 20 writes them (crates/oss/unleash-edge-persistence/src/file.rs)."""
    folder.mkdir()
    tokens = [token(DEV_KEY), token(BACKED_UP), token(INVALID, "Invalid"), token(FORGED)]
    (folder / "unleash_tokens.json").write_text(json.dumps(tokens))
    (folder / "unleash_features.json").write_text(json.dumps([["development", FEATURES]]))
    return folder


def status_of(url: str, key: str) -> int:
    try:
        get_json(f"{url}/api/client/features", key)
    except urllib.error.HTTPError as exc:
        return exc.code
    return 200


def test_backed_up_flags_served_at_once_with_the_upstream_unreachable(tmp_path: Path) -> None:
    quiet_sdk_logs()
    env = {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": f"http://127.0.0.1:{free_port()}",  # nothing listens there
        "RELAY_CLIENT_TOKENS": DEV_KEY,
        "RELAY_BACKUP_FOLDER": str(edge_backup(tmp_path / "backup")),
        "RELAY_LOG_FORMAT": "text",
    }
    checks = [Check("from-backup", {"userId": "1"}), Check("backup-off", {"userId": "1"})]
    with running(tmp_path, env=env) as relay:
        # a configured key and a key known only from the backup: flags at once
        assert python_evaluate(relay.url, DEV_KEY, checks, tmp_path) == [True, False]
        assert python_evaluate(relay.url, BACKED_UP, checks, tmp_path) == [True, False]
        # a key Edge had found invalid, or whose file entry disagrees with the key: asked
        # upstream, which cannot answer
        assert status_of(relay.url, INVALID) == 503
        assert status_of(relay.url, FORGED) == 503
        assert "Unleash Edge backup restored" in relay.logs()
        assert BACKED_UP.split(".")[1] not in relay.logs()

    # a later start: the relay's own cache.db takes over, the folder is not read again
    (tmp_path / "backup" / "unleash_features.json").write_text(json.dumps([["development", {}]]))
    with running(tmp_path, env=env) as relay:
        assert python_evaluate(relay.url, BACKED_UP, checks, tmp_path) == [True, False]
        assert relay.logs().count("Unleash Edge backup restored") == 1


def test_a_backup_that_does_not_read_is_no_reason_not_to_start(tmp_path: Path) -> None:
    folder = tmp_path / "backup"
    folder.mkdir()
    (folder / "unleash_tokens.json").write_text('[{"token": ')
    env = {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": f"http://127.0.0.1:{free_port()}",
        "RELAY_BACKUP_FOLDER": str(folder),
        "RELAY_LOG_FORMAT": "text",
    }
    with running(tmp_path, env=env) as relay:
        assert "Unleash Edge backup file not read" in relay.logs()
        assert status_of(relay.url, BACKED_UP) == 503


def test_backup_files_that_are_not_regular_files_are_skipped(tmp_path: Path) -> None:
    """A named pipe where a backup file should be (a careless mount, a hostile one) has no
    end: the relay skips it and starts, rather than waiting on it for good."""
    import contextlib
    import os

    folder = tmp_path / "backup"
    folder.mkdir()
    os.mkfifo(folder / "unleash_tokens.json")
    os.mkfifo(folder / "unleash_features.json")
    env = {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": f"http://127.0.0.1:{free_port()}",
        "RELAY_BACKUP_FOLDER": str(folder),
        "RELAY_LOG_FORMAT": "text",
    }
    try:
        with running(tmp_path, env=env) as relay:
            assert "not a regular file" in relay.logs()
            assert status_of(relay.url, BACKED_UP) == 503
    finally:  # a reader blocked on a FIFO (the bug) sees its end, so the test can stop
        for name in ("unleash_tokens.json", "unleash_features.json"):
            with contextlib.suppress(OSError):  # ENXIO: no reader, nothing to unblock
                os.close(os.open(folder / name, os.O_WRONLY | os.O_NONBLOCK))


async def test_keys_sharing_a_copy_have_it_encoded_and_saved_once(tmp_path: Path) -> None:
    """An Edge that served hundreds of SDK keys of one environment: its flags are checked,
    encoded and saved once, not once per key (which held a copy per key in memory at once,
    790 MB and 50 s for 200 keys and 3.4 MB of flags). Bounded by the file, not the keys."""
    import tracemalloc

    from relay.edge.flags.backup import FEATURES, restore
    from relay.edge.flags.store import FlagStore
    from relay.store.cache_file import cache_file

    folder = tmp_path / "backup"
    folder.mkdir()
    flags = {
        "version": 2,
        "features": [
            {
                "name": f"flag-{i:05d}",
                "enabled": True,
                "project": "default",
                "strategies": [{"name": "default", "parameters": {"groupId": "x" * 40}}],
            }
            for i in range(4_000)
        ],
    }
    (folder / FEATURES).write_text(json.dumps([["development", flags]]))
    keys = [f"default:development.edge-served-key-{n:03d}-0123456789" for n in range(100)]
    (folder / "unleash_tokens.json").write_text(json.dumps([token(key) for key in keys]))
    size = (folder / FEATURES).stat().st_size
    db = cache_file(tmp_path, "NORMAL")
    await db.open()
    try:
        store = FlagStore(db)
        tracemalloc.start()
        try:
            await restore(folder, store, 10.0)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(await store.keys()) == 100
        heads = await store.heads(0)
    finally:
        await db.close()
    assert len(heads) == 1
    assert peak < 40 * size, (peak, size)  # 15x here; once per key: 114x
