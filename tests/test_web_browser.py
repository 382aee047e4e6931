"""The web page in a real headless Chromium (the ``browser`` fixture of chromium.py: Debian's
``chromium`` and ``chromium-driver``, driven by Selenium), against real processes: a
standalone and a relay in front of it.

A screenshot of every page is saved under the test's tmp dir, and copied to
``tests/artifacts/`` when ``SAVE_TEST_ARTIFACTS`` is set. Without Chromium and its driver
the tests are skipped, except under CI=true (``.ci/run`` installs them), where they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from service import Service, get_json, relay_env, running, stored, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process]

ARTIFACTS = Path(__file__).parent / "artifacts"

BROKEN_WORDS = """
const broken = [];
for (const cell of document.querySelectorAll('main td, main th')) {
  const head = cell.closest('thead');
  if (head && head.getBoundingClientRect().width < 2) continue;  // kept for screen readers
  const texts = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = texts.nextNode(); node; node = texts.nextNode()) {
    if (node.parentElement.closest('.visually-hidden')) continue;  // for screen readers
    for (const word of node.data.matchAll(/[^\\s\\-\\/,.:]+/g)) {
      const range = document.createRange();
      range.setStart(node, word.index);
      range.setEnd(node, word.index + word[0].length);
      const lines = new Set([...range.getClientRects()].filter((r) => r.width > 0)
        .map((r) => Math.round(r.top)));
      if (lines.size > 1) broken.push(word[0]);
    }
  }
}
return broken;
"""
"""The words of the page's tables split over two lines (none: tables wrap between words,
or after a hyphen, a slash, a comma, a dot, a colon)."""

ADMIN = "*:*.browser-admin-secret-0123456789abcdef"
CLIENT = "default:development.browser-client-secret-0123456789"


class Visit:
    """Every page seen: its source and address kept (to look for the key), a screenshot of
    the whole page saved."""

    def __init__(self, driver: Any, base: str, shots: Path) -> None:
        self.driver, self.base, self.shots = driver, base, shots
        self.sources: list[str] = []
        self.urls: list[str] = []
        shots.mkdir(parents=True, exist_ok=True)

    def go(self, path: str) -> None:
        self.driver.get(f"{self.base}{path}")

    def sign_in(self, key: str) -> None:
        """The sign-in form filled with ``key`` and sent."""
        self.go("/login")
        self.find("#key").send_keys(key)
        self.click("form[action='/login'] button")

    def seen(self, name: str, width: int = 1280) -> str:
        self.urls.append(self.driver.current_url)
        source: str = self.driver.page_source
        self.sources.append(source)
        self.screenshot(self.shots / f"{name}.png", width)
        return source

    def screenshot(self, path: Path, width: int) -> None:
        """The whole page (not only the window), ``width`` pixels wide."""
        import base64

        cdp = self.driver.execute_cdp_cmd
        cdp(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
        )
        height = self.driver.execute_script("return document.documentElement.scrollHeight")
        size = {
            "width": width,
            "height": min(int(height), 6000),
            "deviceScaleFactor": 1,
            "mobile": False,
        }
        cdp("Emulation.setDeviceMetricsOverride", size)
        clip = {"x": 0, "y": 0, "width": width, "height": size["height"], "scale": 1}
        shot = cdp(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True, "clip": clip}
        )
        cdp("Emulation.clearDeviceMetricsOverride", {})
        path.write_bytes(base64.b64decode(shot["data"]))

    def requests_elsewhere(self) -> list[str]:
        """What the pages asked of another origin since the last call: requests sent (not
        the browser's own, chrome://), and those the Content-Security-Policy refused (which
        the console reports)."""
        sent = (
            json.loads(entry["message"])["message"] for entry in self.driver.get_log("performance")
        )
        urls = [
            m["params"]["request"]["url"]
            for m in sent
            if m["method"] == "Network.requestWillBeSent"
        ]
        refused = [
            e["message"]
            for e in self.driver.get_log("browser")
            if "Content Security Policy" in e["message"]
        ]
        web = [url for url in urls if url.startswith(("http:", "https:", "ws:", "wss:"))]
        return [url for url in web if not url.startswith(f"{self.base}/")] + refused

    def find(self, css: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, css)

    def click(self, css: str) -> None:
        """Click, and wait for the page the click leads to (forms and links here all load
        a new page)."""
        from selenium.common.exceptions import WebDriverException
        from selenium.webdriver.support.wait import WebDriverWait

        for attempt in range(5):
            old = self.find("html")
            try:
                self.find(css).click()
                break
            except WebDriverException as exc:
                # the document was still being replaced (after a resize or a navigation):
                # its nodes are gone; found again in the new one once it has loaded
                if attempt == 4 or "does not belong to the document" not in str(exc):
                    raise
                WebDriverWait(self.driver, 30).until(
                    lambda driver: driver.execute_script("return document.readyState")
                    == "complete"
                )
        WebDriverWait(self.driver, 30).until(lambda driver: _gone(old))


def _gone(element: Any) -> bool:
    """Whether ``element``'s document was replaced. Chromium says so in two ways: a stale
    element reference, or (while the new document is still being built) a node that "does
    not belong to the document"; selenium's own ``staleness_of`` knows only the first."""
    from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

    try:
        element.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return True
        raise
    return False


def call(url: str, key: str, body: Any = None, method: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url,
        data=data,
        method=method or ("POST" if data is not None else "GET"),
        headers={"Authorization": key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        return error.code, None


def features(central: Service) -> dict[str, bool]:
    body = get_json(f"{central.url}/api/client/features", CLIENT)
    return {f["name"]: f["enabled"] for f in body["features"]}


def prepare(central: Service, relay: Service) -> None:
    """A flag on in development, counts and a registration that came through the relay,
    a name no flag has, and the relay's report."""
    admin = f"{central.url}/api/admin/projects/default/features"
    assert call(admin, ADMIN, {"name": "checkout", "description": "New checkout"})[0] == 201
    assert call(f"{admin}/checkout/environments/development/on", ADMIN, {})[0] == 200
    assert call(admin, ADMIN, {"name": "search-v2", "type": "experiment"})[0] == 201
    registration = {
        "appName": "shop",
        "instanceId": "shop-1",
        "sdkVersion": "unleash-client-python:6.9.1",
        "strategies": ["default"],
        "started": datetime.now(UTC).isoformat(),
        "interval": 15,
    }
    assert call(f"{relay.url}/api/client/register", CLIENT, registration)[0] == 202
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).isoformat()
    entries = [
        {
            "featureName": "checkout",
            "appName": "shop",
            "environment": "development",
            "timestamp": hour,
            "yes": 30,
            "no": 12,
            "variants": {"blue": 20, "green": 10},
        },
        {"featureName": "chekout", "appName": "shop", "environment": "development", "yes": 1},
    ]
    assert (
        call(
            f"{relay.url}/api/client/metrics/bulk", CLIENT, {"applications": [], "metrics": entries}
        )[0]
        == 202
    )
    wait_until(lambda: stored(central.url, ADMIN, "checkout") == 30, "the counts stored")
    wait_until(
        lambda: get_json(f"{central.url}/api/admin/metrics/edges", ADMIN), "the relay reported"
    )
    wait_until(
        lambda: get_json(f"{central.url}/api/admin/metrics/applications", ADMIN)["applications"],
        "the registration stored",
    )


def test_an_operator_uses_the_web_page(browser: Any, tmp_path: Path) -> None:
    central_env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
    with running(tmp_path / "central", env=central_env, name="central") as central:
        env = relay_env(
            central.url,
            CLIENT,
            RELAY_INSTANCE_ID="edge-relay-1",
            RELAY_CLIENT_TOKENS=CLIENT,
            RELAY_REPORT_INTERVAL="0.3",
        )
        with running(tmp_path / "relay", env=env, name="relay") as relay:
            prepare(central, relay)
            visit = Visit(browser, central.url, tmp_path / "screenshots")
            operate(visit, central)
            logs = central.logs() + relay.logs()
    for text in (*visit.sources, *visit.urls, logs):
        assert ADMIN not in text and ADMIN.split(".", 1)[1] not in text
    if os.environ.get("SAVE_TEST_ARTIFACTS"):
        shutil.copytree(visit.shots, ARTIFACTS / "web", dirs_exist_ok=True)


def operate(visit: Visit, central: Service) -> None:
    # signing in: the form, then the flags
    visit.go("/")
    assert "/login" in visit.driver.current_url
    visit.seen("01-sign-in")
    visit.find("#key").send_keys(ADMIN)
    visit.click("form[action='/login'] button")
    assert visit.driver.current_url == f"{central.url}/"
    home = visit.seen("02-flags")
    assert "checkout" in home and "search-v2" in home

    # the playground: a context filled in, every flag's result and why
    visit.click("nav a[href='/playground']")
    visit.find("#userId").send_keys("user-7")
    visit.find("#properties").send_keys("plan=pro")
    visit.click("form.playground button")
    assert "userId=user-7" in visit.driver.current_url
    rows = {
        row.find_element("css selector", "th").text: row.text
        for row in visit.driver.find_elements("css selector", "table.results tbody tr")
    }
    assert "strategy 1 flexibleRollout matched" in rows["checkout"], rows
    assert "disabled in this environment" in rows["search-v2"], rows
    visit.seen("02b-playground")
    visit.go("/")

    # finding a flag, and its usage: the counts posted, charted and tabled
    visit.find("#q").send_keys("check")
    visit.click("form.search button")
    visit.click("a[href='/flags/checkout']")
    usage = visit.seen("03-flag-usage")
    assert visit.driver.current_url == f"{central.url}/flags/checkout"
    totals = visit.find("dl.totals").text
    assert "42" in totals and "30" in totals and "12" in totals
    assert len(visit.driver.find_elements("css selector", "figure.chart svg rect")) >= 4
    assert "Variants of checkout" in usage and "blue: 20" in usage

    # turning it off in development: the client API follows
    assert features(central)["checkout"] is True
    visit.click("button[aria-label^='checkout in development is on']")
    assert visit.driver.current_url == f"{central.url}/flags/checkout"
    wait_until(lambda: features(central)["checkout"] is False, "the SDKs see it off")
    visit.seen("04-flag-off")

    # applications: the path through the relay; relays: the one that reported
    visit.go("/applications")
    apps = visit.seen("05-applications")
    assert visit.driver.execute_script(BROKEN_WORDS) == []
    path = visit.find("ol.path").text.split("\n")
    assert path[0] == "SDK" and path[-1] == "here" and "relay" in path[1], path
    assert "unleash-client-python:6.9.1" in apps
    visit.go("/relays")
    relays = visit.seen("06-relays")
    assert "edge-relay-1" in relays and "stale" not in visit.find("table tbody").text
    assert visit.driver.execute_script(BROKEN_WORDS) == []  # at 1280 px: "Ver/sion" no more

    visit.go("/unknown-flags")
    assert "chekout" in visit.seen("07-unknown-flags")

    # a key made, used, revoked, refused
    visit.go("/keys")
    visit.seen("08-keys")
    visit.find("#name").send_keys("browser-made")
    visit.click("form[action='/keys'] button")
    visit.seen("09-key-created")
    secret = visit.find("#secret").get_attribute("value")
    ingest = f"{central.url}/api/client/metrics/bulk"
    empty = {"applications": [], "metrics": []}
    assert call(ingest, secret, empty)[0] == 202
    visit.go("/keys")
    visit.click("button[aria-label='Revoke key browser-made']")
    assert "Revoke this key?" in visit.seen("10-key-revoke-confirm")
    assert call(ingest, secret, empty)[0] == 202  # only asked so far
    visit.click("input[name='confirm'] ~ button")
    visit.seen("11-key-revoked")
    assert "browser-made" not in visit.find("table tbody").text
    assert visit.find("p.done").text.startswith("Revoked the key browser-made")
    assert call(ingest, secret, empty)[0] == 401

    # the API's page, drawn from this origin alone, and the flags in a narrow window
    elsewhere = visit.requests_elsewhere()
    visit.go("/docs")
    wait_until(
        lambda: (
            "bulk" in visit.driver.page_source.lower()
            and visit.driver.find_elements("css selector", "h1, h2")
            # the menu's footer, rendered with the logo Redoc loads
            and visit.driver.find_elements("css selector", "a[href='https://redocly.com/redoc/']")
        ),
        "Redoc drew the API",
    )
    visit.seen("12-api-docs")
    assert elsewhere == [] and visit.requests_elsewhere() == []
    visit.go("/")
    visit.seen("13-flags-narrow", width=420)

    # signing out: the session is over
    visit.click("form.signout button")
    assert visit.driver.current_url.endswith("/login")
    visit.go("/keys")
    assert "/login" in visit.driver.current_url
    visit.seen("14-signed-out")
