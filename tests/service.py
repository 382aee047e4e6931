"""Run the real ``relay`` program as a subprocess on a free loopback port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Service:
    process: subprocess.Popen[str]
    port: int
    log_path: Path
    out_path: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def logs(self) -> str:
        return self.log_path.read_text()

    def stdout(self) -> str:
        return self.out_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout)


def wait_ready(
    url: str, process: subprocess.Popen[str], timeout: float = 30, path: str = "/ready"
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}{path}", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} not ready after {timeout}s")


def start(
    workdir: Path,
    *args: str,
    env: dict[str, str] | None = None,
    port: int | None = None,
    name: str = "relay",
    wait_for: str = "/ready",
) -> Service:
    """Start ``relay serve`` in ``workdir`` with only the given RELAY_* variables set."""
    port = port or free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    clean.update(env or {})
    clean.setdefault("RELAY_PORT", str(port))
    clean.setdefault("RELAY_HOST", "127.0.0.1")
    clean.setdefault("RELAY_SQLITE_SYNCHRONOUS", "NORMAL")
    workdir.mkdir(parents=True, exist_ok=True)
    log_path, out_path = workdir / f"{name}.log", workdir / f"{name}.out"
    with out_path.open("a") as out, log_path.open("a") as err:
        process = subprocess.Popen(
            [sys.executable, "-m", "relay", "serve", *args],
            cwd=workdir,
            env=clean,
            stdout=out,
            stderr=err,
            text=True,
        )
    service = Service(process, port, log_path, out_path)
    try:
        wait_ready(service.url, process, path=wait_for)
    except Exception:
        service.stop(signal.SIGKILL)
        raise RuntimeError(f"{name} failed to start:\n{service.logs()}") from None
    return service


@contextmanager
def running(workdir: Path, *args: str, **kwargs: object) -> Iterator[Service]:
    service = start(workdir, *args, **kwargs)  # type: ignore[arg-type]
    try:
        yield service
    finally:
        try:
            service.stop(signal.SIGTERM, timeout=30)
        except subprocess.TimeoutExpired:
            service.stop(signal.SIGKILL)


def relay_env(upstream: str, key: str, **extra: str) -> dict[str, str]:
    """Settings of a test relay: flushes every 200 ms with ``key``, short backoffs."""
    return {
        "RELAY_MODE": "relay",
        "RELAY_UPSTREAM_URL": upstream,
        "RELAY_UPSTREAM_TOKENS": key,
        "RELAY_FLUSH_INTERVAL": "0.2",
        "RELAY_BACKOFF_MAX": "0.5",
        **extra,
    }
