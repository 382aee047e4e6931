"""The real Unleash Proxy (npm ``@unleash/proxy`` 1.4.19, with the ``unleash-client`` it
evaluates with pinned to 6.12.1), installed once from npm into ``tests/.proxy`` (ignored by
git) and run as ``node dist/start.js`` from its environment variables, beside ``relay
proxy`` from the same ones. Its SDK's backup of the flags goes to a temporary folder of
the test's own (``TMPDIR``), so that runs in parallel never read each other's."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sdks import HERE, node_modules
from service import Service, free_port, start

PROXY = {"@unleash/proxy": "1.4.19", "unleash-client": "6.12.1"}


def proxy_modules() -> Path:
    """Its node_modules; skipped when npm cannot get them, except under CI=true."""
    found = node_modules(PROXY, HERE / ".proxy")
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(found)
        pytest.skip(found)
    return found


def real_proxy(modules: Path, workdir: Path, env: dict[str, str]) -> Service:
    """The real Proxy in ``workdir``, from ``env`` (the Proxy's variables), once ready."""
    temporary = workdir / "tmp"
    temporary.mkdir(parents=True, exist_ok=True)
    program = ("node", str(modules / "@unleash" / "proxy" / "dist" / "start.js"))
    port = free_port()
    return start(
        workdir,
        env={**env, "PORT": str(port), "TMPDIR": str(temporary)},
        port=port,
        name="unleash-proxy",
        wait_for="/proxy/health",
        program=program,
    )
