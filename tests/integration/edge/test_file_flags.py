"""Offline mode's flags (``relay.edge.flags.bootstrap.FileFlags``) on a real file, read
again as it changes: what the reload takes as failed is the file it read, not the file as
it is once the read failed."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from conftest import DEV_KEY

from relay.core.keys import offline_principal
from relay.edge.flags.bootstrap import FileFlags
from relay.wire.common import KeyType

PRINCIPAL = offline_principal(DEV_KEY, KeyType.CLIENT)


def simple(*names: str) -> str:
    return json.dumps({name: {"enabled": True} for name in names})


async def served(flags: FileFlags) -> list[str]:
    document = json.loads((await flags.document(PRINCIPAL)).body)
    return sorted(feature["name"] for feature in document["features"])


class ThenWrite(ThreadPoolExecutor):
    """The event loop's executor, which writes ``text`` to ``path`` once the first job it
    ran (the reload's read) has ended, and before the event loop sees its result: a
    writer finishing the file while a reload read half of it, deterministically."""

    def __init__(self, path: Path, text: str) -> None:
        super().__init__(max_workers=1)
        self._path, self._text = path, text
        self._done = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future = super().submit(fn, *args, **kwargs)
        if not self._done:
            wait([future])
            self._path.write_text(self._text)
            self._done = True
        return future


async def test_a_file_finished_while_its_half_was_read_is_read_again(tmp_path: Path) -> None:
    """A reload read the file half-written (not JSON); the writer finished it before the
    failure was noted. The next tick reads the whole file: the failure belongs to the half
    read, not to the file as it was then (taken as failed, it was never read again, and
    the old flags were served until the file changed once more)."""
    path = tmp_path / "features.json"
    path.write_text(simple("old"))
    flags = FileFlags(path, {DEV_KEY: PRINCIPAL})
    flags.load()
    path.write_text('{"new": {"enabled": tr')
    executor = ThenWrite(path, simple("new", "newer"))
    asyncio.get_running_loop().set_default_executor(executor)
    try:
        await flags.reload()  # reads the half, fails; the file is whole meanwhile
        assert await served(flags) == ["old"]
        await flags.reload()
        assert await served(flags) == ["new", "newer"]
    finally:
        executor.shutdown()


async def test_a_broken_file_is_said_once_and_read_again_when_it_changes(
    tmp_path: Path, caplog: Any
) -> None:
    path = tmp_path / "features.json"
    path.write_text(simple("old"))
    flags = FileFlags(path, {DEV_KEY: PRINCIPAL})
    flags.load()
    path.write_text('{"new": ')
    for _ in range(3):
        await flags.reload()
    path.unlink()
    for _ in range(3):
        await flags.reload()
    said = [r.getMessage() for r in caplog.records if "not reloaded" in r.getMessage()]
    assert len(said) == 2  # once for the broken file, once for the missing one
    assert await served(flags) == ["old"]
    path.write_text(simple("back"))
    await flags.reload()
    assert await served(flags) == ["back"]
