"""A bounded background load for fault tests: clients posting bulk metrics in threads.

Each request carries its own ``Idempotency-Key`` and is retried with that same key until it
is answered 202, as a careful client would: a request whose answer was lost to a crash is
then applied exactly once, so the expected upstream total is simply everything posted.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass, field

from service import wait_until


@dataclass
class Load:
    url: str
    key: str
    clients: int = 4
    feature: str = "load"
    statuses: dict[int, int] = field(default_factory=dict)
    accepted: int = 0
    bad_bodies: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)
    _answers: list[int] = field(default_factory=list)  # answers (or failures) per client

    def start(self) -> None:
        self._answers = [0] * self.clients
        for number in range(self.clients):
            thread = threading.Thread(target=self._client, args=(number,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 120) -> None:
        """Stop sending new requests; wait until every started one has been accepted."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
            assert not thread.is_alive(), "a client could not get its request accepted"

    def wait_accepted(self, more: int) -> None:
        """Wait until ``more`` requests have been accepted since this call."""
        target = self.accepted + more
        wait_until(lambda: self.accepted >= target, f"{more} more load requests accepted")

    def wait_answered(self) -> None:
        """Wait until every client has had the answer (or connection error) to a request that
        was in flight at this call, or to a later one: every earlier answer is counted then."""
        with self._lock:
            before = list(self._answers)
        wait_until(
            lambda: all(now > then for now, then in zip(self._answers, before, strict=True)),
            "every load client answered",
        )

    def _client(self, number: int) -> None:
        while not self._stop.is_set():
            body = json.dumps(
                {
                    "applications": [],
                    "metrics": [
                        {
                            "featureName": self.feature,
                            "appName": f"client-{number}",
                            "environment": "development",
                            "yes": 1,
                            "no": 0,
                        }
                    ],
                }
            ).encode()
            self._until_accepted(number, body, str(uuid.uuid4()))

    def _until_accepted(self, number: int, body: bytes, idempotency_key: str) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            status = self._post(body, idempotency_key)
            with self._lock:
                self._answers[number] += 1
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 202:
                    self.accepted += 1
                    return
            time.sleep(0.05)

    def _post(self, body: bytes, idempotency_key: str) -> int:
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Authorization": self.key,
                "Content-Type": "application/json",
                "Idempotency-Key": idempotency_key,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return int(response.status)
        except urllib.error.HTTPError as error:
            payload = error.read()
            try:
                json.loads(payload)["name"]  # every error has the JSON error body
            except (ValueError, KeyError):
                with self._lock:
                    self.bad_bodies.append(payload[:200].decode("utf-8", "replace"))
            return int(error.code)
        except (OSError, urllib.error.URLError):
            return 0  # connection refused or reset: the relay is restarting
