"""The web page in a real headless Chromium as the browser tests drive it: the program
started for a page, a visit of it (``Visit``), its keys and the folder of screenshots, and the
form steps (fill, choose, done)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from conftest import registration
from service import Service, get_json, relay_env, running, stored, wait_until

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
                    lambda driver: driver.execute_script("return document.readyState") == "complete"
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


def prepare(central: Service, relay: Service) -> None:
    """A flag on in development, counts and a registration that came through the relay,
    a name no flag has, and the relay's report."""
    admin = f"{central.url}/api/admin/projects/default/features"
    assert call(admin, ADMIN, {"name": "checkout", "description": "New checkout"})[0] == 201
    assert call(f"{admin}/checkout/environments/development/on", ADMIN, {})[0] == 200
    assert call(admin, ADMIN, {"name": "search-v2", "type": "experiment"})[0] == 201
    assert call(f"{relay.url}/api/client/register", CLIENT, registration())[0] == 202
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


NARROW = 390
SIDEWAYS = """
return [document.documentElement.scrollWidth, window.innerWidth,
  [...document.querySelectorAll('*')].filter((el) => el.scrollWidth > el.clientWidth + 1
    && ['auto', 'scroll'].includes(getComputedStyle(el).overflowX)).map((el) => el.className)];
"""


UNNAMED = """
const named = (el) => {
  if (el.getAttribute('aria-label')) return true;
  if (el.id && document.querySelector(`label[for="${el.id}"]`)) return true;
  if (el.closest('label')) return true;
  return ['BUTTON', 'A'].includes(el.tagName) && el.textContent.trim() !== '';
};
return [...document.querySelectorAll('a, button, input:not([type=hidden]), select, textarea')]
  .filter((el) => el.getAttribute('aria-hidden') !== 'true' && !named(el))
  .map((el) => el.outerHTML.slice(0, 120));
"""


def fill(visit: Visit, css: str, text: str) -> None:
    field = visit.find(css)
    field.clear()
    field.send_keys(text)


def choose(visit: Visit, css: str, value: str) -> None:
    from selenium.webdriver.support.ui import Select

    select = Select(visit.find(css))
    if visit.driver.find_elements("css selector", f"{css} option[value='{value}']"):
        select.select_by_value(value)
    else:  # an option without a value attribute: its text is its value
        select.select_by_visible_text(value)


def done(visit: Visit) -> str:
    text: str = visit.find("p.done").text
    return text


@contextmanager
def prepared(tmp_path: Path) -> Iterator[tuple[Service, Service]]:
    """A standalone and a relay reporting to it, as ``prepare`` leaves them."""
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
            yield central, relay


def served(central: Service, key: str) -> dict[str, Any]:
    """The flags ``central`` serves an SDK holding ``key``, by name."""
    body = get_json(f"{central.url}/api/client/features", key)
    return {f["name"]: f for f in body["features"]}
