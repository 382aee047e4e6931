"""A real headless Chromium for the browser tests (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium): the ``browser`` fixture, registered in conftest.py.

Nothing downloads a browser: without Chromium and its driver the tests are skipped, except
under CI=true (``.ci/run`` installs them), where they fail.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from service import free_port

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def browser_or_skip() -> None:
    missing = [p for p in (CHROMIUM, DRIVER) if not os.access(p, os.X_OK)]
    if not missing:
        return
    reason = f"no {' or '.join(missing)}: apt-get install chromium chromium-driver"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    browser_or_skip()
    os.environ.setdefault("SE_AVOID_STATS", "true")  # Selenium Manager: no calls out
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as DriverService

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    # every request the pages make, and the console (CSP refusals), kept for the checks
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=DriverService(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@contextmanager
def origin(answer: Callable[[str], tuple[bytes, str]]) -> Iterator[str]:
    """A web server on loopback, of another origin than the service: the site whose page
    runs a browser SDK. ``answer(path)`` gives each GET its body and content type (404
    when the body is empty)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body, kind = answer(self.path)
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
