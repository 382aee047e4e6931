"""The real SDKs as test clients: Python's ``UnleashClient`` in this process, and Node's
``unleash-client`` through ``sdk_eval.js`` (both Node scripts start the SDK with
``sdk_node.js``), each fetching flags from a server and answering a list of checks
(``isEnabled``, or ``getVariant`` when ``variant`` is set).

The Node packages (and the browser SDK, ``unleash-proxy-client``; OpenFeature's SDKs and
OFREP providers) come from npm, pinned, installed once into ``tests/.node`` (ignored by
git): ``node_modules()`` installs them, or says why it could not.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from UnleashClient import UnleashClient
from UnleashClient.cache import FileCache

HERE = Path(__file__).parent
NODE_DIR = HERE / ".node"
PACKAGES = {
    "unleash-client": "6.12.1",
    "@unleash/client-specification": "6.1.0",
    "unleash-proxy-client": "3.8.2",  # the browser SDK: tests/e2e/test_frontend_browser.py
    # OpenFeature's server SDK and its OFREP provider: tests/e2e/test_ofrep_sdks.py
    "@openfeature/server-sdk": "1.23.0",
    "@openfeature/ofrep-provider": "0.1.3",
}
WEB_PACKAGES = {
    # OpenFeature's web SDK and its OFREP provider, in a page: tests/e2e/test_ofrep_browser.py
    # (a folder of their own: the server provider's OFREP core is another major version)
    "@openfeature/web-sdk": "1.10.0",
    "@openfeature/ofrep-web-provider": "0.4.3",
}
WEB_DIR = NODE_DIR / "web"


@dataclass(frozen=True)
class Check:
    toggle: str
    context: dict[str, Any] = field(default_factory=dict)
    variant: bool = False

    def job(self) -> dict[str, Any]:
        return {"toggle": self.toggle, "context": self.context, "variant": self.variant}


def _installed(packages: dict[str, str], directory: Path) -> bool:
    for name, version in packages.items():
        manifest = directory / "node_modules" / name / "package.json"
        if not manifest.is_file() or json.loads(manifest.read_text())["version"] != version:
            return False
    return True


def node_modules(packages: dict[str, str] = PACKAGES, directory: Path = NODE_DIR) -> Path | str:
    """The installed ``node_modules`` of ``packages`` (npm, into ``directory``), or why the
    packages cannot be had."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        return "node or npm is not installed"
    if not _installed(packages, directory):
        directory.mkdir(exist_ok=True)
        wanted = [f"{name}@{version}" for name, version in packages.items()]
        command = ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(directory)]
        try:
            done = subprocess.run(
                [*command, *wanted], capture_output=True, text=True, timeout=900, check=False
            )
        except subprocess.TimeoutExpired:
            return "npm install did not finish in 900 s"
        if done.returncode != 0 or not _installed(packages, directory):
            return f"npm install failed: {done.stderr.strip()[-500:]}"
    return directory / "node_modules"


def node_evaluate(
    modules: Path, url: str, key: str, checks: list[Check], app: str = "node-sdk-test"
) -> list[Any]:
    out = _node("sdk_eval.js", modules, url, key, app, checks=[c.job() for c in checks])
    return [json.loads(line) for line in out.splitlines()]


def node_impact(modules: Path, url: str, key: str, rounds: int, app: str) -> None:
    """The Node SDK sends impact metrics ``rounds`` times (``sdk_impact.js``)."""
    _node("sdk_impact.js", modules, url, key, app, rounds=rounds)


def node_count(modules: Path, url: str, key: str, toggle: str, times: int, app: str) -> bool:
    """The Node SDK evaluates ``toggle`` ``times`` times and sends its counts
    (``sdk_count.js``); what it answered."""
    out = _node("sdk_count.js", modules, url, key, app, toggle=toggle, times=times)
    answer: bool = json.loads(out)
    return answer


def _node(script: str, modules: Path, url: str, key: str, app: str, **job: Any) -> str:
    """Runs one of the Node SDK scripts (``sdk_node.js``) on a job; its stdout."""
    done = subprocess.run(
        ["node", str(HERE / script)],
        input=json.dumps({"url": f"{url}/api", "key": key, "appName": app, **job}),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(modules)},
        check=False,
    )
    assert done.returncode == 0, f"node exited {done.returncode}: {done.stderr}"
    return done.stdout


def python_evaluate(
    url: str, key: str, checks: list[Check], cache_dir: Path, app: str = "python-sdk-test"
) -> list[Any]:
    client = UnleashClient(
        url=f"{url}/api",
        app_name=app,
        instance_id=f"python-eval-{uuid.uuid4()}",
        custom_headers={"Authorization": key},
        disable_metrics=True,
        disable_registration=True,
        refresh_interval=60,
        cache=FileCache(app, directory=str(cache_dir / uuid.uuid4().hex)),
    )
    client.initialize_client()
    try:
        assert client.is_initialized
        return [
            client.get_variant(c.toggle, c.context)
            if c.variant
            else client.is_enabled(c.toggle, c.context)
            for c in checks
        ]
    finally:
        client.destroy()


def murmur3(key: str, seed: int = 0) -> int:
    """MurmurHash3 (x86, 32 bits) of a string's UTF-8 bytes: how SDKs bucket users."""
    data, h = key.encode(), seed
    c1, c2, mask = 0xCC9E2D51, 0x1B873593, 0xFFFFFFFF
    rounded = len(data) - len(data) % 4
    for i in range(0, rounded, 4):
        k = int.from_bytes(data[i : i + 4], "little") * c1 & mask
        k = ((k << 15 | k >> 17) & mask) * c2 & mask
        h ^= k
        h = ((h << 13 | h >> 19) & mask) * 5 + 0xE6546B64 & mask
    k = int.from_bytes(data[rounded:], "little") if len(data) % 4 else 0
    if k:
        k = k * c1 & mask
        h ^= ((k << 15 | k >> 17) & mask) * c2 & mask
    h ^= len(data)
    h = (h ^ h >> 16) * 0x85EBCA6B & mask
    h = (h ^ h >> 13) * 0xC2B2AE35 & mask
    return h ^ h >> 16


def bucket(group: str, user: str, size: int = 100, seed: int = 0) -> int:
    """Unleash's normalised value, 1..size, of a user in a group (a rollout's percentage
    with the default seed; a variant's weight point with seed 86028157)."""
    return murmur3(f"{group}:{user}", seed) % size + 1


VARIANT_SEED = 86028157


def quiet_sdk_logs() -> None:
    """The Python SDK warns for every flag it does not know; the tests ask on purpose."""
    logging.getLogger("UnleashClient").setLevel(logging.ERROR)


@dataclass(frozen=True)
class Evaluation:
    """One OpenFeature evaluation: the client's method by ``kind`` (boolean, string,
    integer, float, object; Node has one number), the code's default, the context (its
    ``targetingKey`` and attributes)."""

    kind: str
    flag: str
    fallback: Any
    context: dict[str, Any] = field(default_factory=dict)


def ofrep_python(url: str, key: str, evaluations: list[Evaluation]) -> list[dict[str, Any]]:
    """Each evaluation's details through OpenFeature's Python SDK and its OFREP provider
    (PyPI ``openfeature-sdk``, ``openfeature-provider-ofrep``): value, reason, variant,
    error code."""
    from openfeature import api
    from openfeature.contrib.provider.ofrep import OFREPProvider
    from openfeature.evaluation_context import EvaluationContext

    domain = f"ofrep-{uuid.uuid4()}"
    api.set_provider(OFREPProvider(url, headers_factory=lambda: {"Authorization": key}), domain)
    client = api.get_client(domain)
    found = []
    for e in evaluations:
        attributes = {k: v for k, v in e.context.items() if k != "targetingKey"}
        context = EvaluationContext(e.context.get("targetingKey"), attributes)
        details = getattr(client, f"get_{e.kind}_details")(e.flag, e.fallback, context)
        code = details.error_code
        found.append(
            {
                "value": details.value,
                "reason": getattr(details.reason, "value", details.reason),
                "variant": details.variant,
                "errorCode": None if code is None else code.value,
            }
        )
    api.clear_providers()
    return found


def ofrep_node(
    modules: Path, url: str, key: str, evaluations: list[Evaluation]
) -> list[dict[str, Any]]:
    """The same through OpenFeature's Node server SDK and its OFREP provider (npm
    ``@openfeature/server-sdk``, ``@openfeature/ofrep-provider``; ``ofrep_node.js``)."""
    checks = [
        {
            "kind": "number" if e.kind in ("integer", "float") else e.kind,
            "flag": e.flag,
            "fallback": e.fallback,
            "context": e.context,
        }
        for e in evaluations
    ]
    done = subprocess.run(
        ["node", str(HERE / "ofrep_node.js")],
        input=json.dumps({"url": url, "key": key, "checks": checks}),
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NODE_PATH": str(modules)},
        check=False,
    )
    assert done.returncode == 0, f"node exited {done.returncode}: {done.stderr}"
    return [json.loads(line) for line in done.stdout.splitlines()]
