"""The real browser SDK (npm ``unleash-proxy-client``, its browser build) in a real headless
Chromium, against ``relay proxy`` run from the Unleash Proxy's variables, as a shop that ran
the Proxy would point it: ``url`` at ``{PROXY_BASE_PATH}/proxy``, ``clientKey`` one of
``UNLEASH_PROXY_CLIENT_KEYS``, from a page of another origin (CORS and all). Each user's
flags as configured, a change seen after the refresh, the counts stored at the standalone
(through relay's buffer), and the flags still served while the standalone is down.
The page, its users and their expected flags are test_frontend_browser.py's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from flagkit import env_path, http
from pagekit import (  # noqa: F401  (page_origin: the fixture)
    ADMIN,
    CENTRAL_ENV,
    CLIENT,
    FRONTEND,
    USERS,
    Page,
    build_flags,
    expected,
    page_origin,
)
from service import running, settle, start, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process]

BROWSER_KEY = "shop-web-proxy-key"


def test_the_browser_sdk_against_relay_proxy(
    browser: Any,
    page_origin: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    with running(tmp_path / "central", env=CENTRAL_ENV, name="central") as central:
        build_flags(central.url)
        wanted = {user: expected(user) for user in USERS}
        env = {
            "UNLEASH_URL": f"{central.url}/api",
            "UNLEASH_API_TOKEN": CLIENT,
            "UNLEASH_PROXY_CLIENT_KEYS": f"another-app-key,{BROWSER_KEY}",
            "PROXY_BASE_PATH": "/flags",
            "UNLEASH_FETCH_INTERVAL": "1000",
            "UNLEASH_METRICS_INTERVAL": "500",
            "RELAY_WORKERS": "auto",
        }
        proxy = start(
            tmp_path / "proxy",
            "proxy",
            env=env,
            name="relay-proxy",
            wait_for="/flags/proxy/health",
            program=(sys.executable, "-m", "relay"),
        )
        try:
            page = Page(browser, page_origin, proxy.url, "/flags/proxy", BROWSER_KEY)
            assert page.answers() == wanted
            assert http("POST", f"{central.url}{env_path('vip')}/off", key=ADMIN)[0] == 200
            vip_off = {user: expected(user, vip=False) for user in USERS}
            wait_until(lambda: page.answers() == vip_off, "the SDKs saw vip turned off")
            counted = page.count(3)
            settle(central, ADMIN, "counted", counted)
            # the standalone goes away: a freshly loaded page gets the flags all the same
            central.stop()
            page.stop()
            again = Page(browser, page_origin, proxy.url, "/flags/proxy", BROWSER_KEY)
            assert again.answers() == vip_off
            again.stop()
        finally:
            proxy.close()
    assert BROWSER_KEY not in proxy.logs()
