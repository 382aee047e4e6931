"""Real SDKs kept running while a test changes flags: Node's ``unleash-client`` in a process
(``sdk_watch.js``: streaming, or delta polling) and Python's ``UnleashClient`` in streaming
mode in a thread of this process. Each records every change of what ``isEnabled`` answers
for the watched flags, with the monotonic time it was seen, so a test can say when a change
arrived."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from sdks import HERE
from service import wait_until
from UnleashClient import UnleashClient
from UnleashClient.cache import FileCache

State = dict[str, bool]


class Watcher:
    """The states seen, in order, with when each was first seen."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, State]] = []
        self.modes: list[Any] = []
        self._lock = threading.Lock()

    def saw(self, state: State) -> None:
        with self._lock:
            if not self.seen or self.seen[-1][1] != state:
                self.seen.append((time.monotonic(), state))

    def state(self) -> State | None:
        with self._lock:
            return self.seen[-1][1] if self.seen else None

    def arrival(self, want: State, after: float, timeout: float = 30.0) -> float:
        """Seconds from ``after`` (a ``time.monotonic()``) until ``want`` was seen: waits
        until it is, fails past ``timeout``."""

        def found() -> float | None:
            with self._lock:
                return next((t - after for t, s in self.seen if t >= after and s == want), None)

        try:
            wait_until(lambda: found() is not None, f"the SDK to see {want}", timeout=timeout)
        except AssertionError as exc:  # what it saw, and how it fetched: the diagnosis
            raise AssertionError(f"{exc}; saw {self.seen}, modes {self.modes}") from None
        arrived = found()
        assert arrived is not None
        return arrived


class NodeWatcher(Watcher):
    def __init__(
        self,
        modules: Path,
        url: str,
        key: str,
        toggles: list[str],
        mode: dict[str, Any],
        **job: Any,
    ) -> None:
        super().__init__()
        job = {"url": f"{url}/api", "key": key, "appName": "node-watch", "toggles": toggles, **job}
        self._process = subprocess.Popen(
            ["node", str(HERE / "sdk_watch.js")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "NODE_PATH": str(modules)},
        )
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({**job, "mode": mode}))
        self._process.stdin.close()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            value = json.loads(line)
            if "mode" in value:
                self.modes.append(value["mode"])
            else:
                self.saw(value)

    def close(self) -> None:
        self._process.kill()
        self._process.wait(timeout=10)
        self._reader.join(timeout=10)
        for pipe in (self._process.stdout, self._process.stderr):
            if pipe is not None:
                pipe.close()


class PythonWatcher(Watcher):
    """``UnleashClient`` with ``experimental_mode={"type": "streaming"}``: its flags come
    only from the stream."""

    def __init__(self, url: str, key: str, toggles: list[str], cache_dir: Path) -> None:
        super().__init__()
        self.client = UnleashClient(
            url=f"{url}/api",
            app_name="python-watch",
            instance_id=f"python-watch-{uuid.uuid4()}",
            custom_headers={"Authorization": key},
            disable_metrics=True,
            disable_registration=True,
            experimental_mode={"type": "streaming"},
            cache=FileCache("python-watch", directory=str(cache_dir / uuid.uuid4().hex)),
        )
        self.client.initialize_client()
        self._toggles = toggles
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            self.saw({t: self.client.is_enabled(t) for t in self._toggles})

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.client.destroy()
