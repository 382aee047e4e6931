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

from relay.app import build_app
from relay.core.keys import offline_principal
from relay.edge.flags.bootstrap import FileFlags
from relay.settings import load_settings
from relay.wire.common import KeyType

PRINCIPAL = offline_principal(DEV_KEY, KeyType.CLIENT)
FRONTEND = "*:development.file-flags-frontend-key-0123456789"


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


SURROGATES = '{"old\\ud800": {"enabled": true, "variant": "blue\\udc80"}}'
"""Valid JSON whose ``\\u`` escapes spell lone surrogates: strings with no UTF-8."""


async def test_a_string_that_is_not_unicode_is_served_escaped_as_it_came(tmp_path: Path) -> None:
    """A file's (or an upstream's) escape can spell a lone surrogate, which has no UTF-8:
    encoding such a flag raised out of the reload, which was then read again and logged
    with a traceback at every tick, and out of the start. The answer is in ASCII instead,
    the string escaped as it came."""
    path = tmp_path / "features.json"
    path.write_text(SURROGATES)
    flags = FileFlags(path, {DEV_KEY: PRINCIPAL})
    flags.load()
    body = (await flags.document(PRINCIPAL)).body
    assert b'"old\\ud800"' in body and body.isascii()
    assert await served(flags) == ["old\ud800"]
    path.write_text('{"new\\udc80": {"enabled": true}}')
    await flags.reload()
    assert await served(flags) == ["new\udc80"]


async def test_every_api_answers_a_flag_that_is_not_unicode(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    """The client features, the Frontend API and OFREP, on an offline relay of such a file:
    each answers 200 with the strings escaped, never 500."""
    file = tmp_path / "features.json"
    file.write_text(SURROGATES)
    settings = load_settings(
        {
            "mode": "offline",
            "workers": 1,
            "data_dir": tmp_path / "data",
            "bootstrap_file": file,
            "client_tokens": [DEV_KEY],
            "frontend_tokens": [FRONTEND],
        }
    )
    client = await aiohttp_client(build_app(settings))
    for method, path, key in (
        ("GET", "/api/client/features", DEV_KEY),
        ("GET", "/api/frontend", FRONTEND),
        ("POST", "/ofrep/v1/evaluate/flags", FRONTEND),
        ("POST", "/ofrep/v1/evaluate/flags/old%ED%A0%80", FRONTEND),
    ):
        response = await client.request(method, path, headers={"Authorization": key}, json={})
        body = await response.read()
        assert response.status < 500, (path, response.status, body)
        assert response.status != 200 or body.isascii(), (path, body)
    features = json.loads(
        await (await client.get("/api/client/features", headers={"Authorization": DEV_KEY})).read()
    )
    assert [f["name"] for f in features["features"]] == ["old\ud800"]
    front = json.loads(
        await (await client.get("/api/frontend", headers={"Authorization": FRONTEND})).read()
    )
    assert front["toggles"][0]["variant"]["name"] == "blue\udc80"
