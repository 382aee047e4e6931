"""The web page's admin pages in a real headless Chromium (issue 23): segments, projects and
environments, the archive, the not-found page, the warning before revoking the session's own
key, a confirmation line after each action; then every page at 390 px wide: no sideways
scroll, every control named for screen readers, the revoke buttons reached by keyboard.

Screenshots are saved under the test's tmp dir (``tests/artifacts/web-admin/`` with
``SAVE_TEST_ARTIFACTS``)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from browserkit import (
    ADMIN,
    ARTIFACTS,
    BROKEN_WORDS,
    NARROW,
    SIDEWAYS,
    UNNAMED,
    Visit,
    call,
    prepared,
)
from service import Service

pytestmark = [pytest.mark.browser, pytest.mark.process]


def text(visit: Visit, css: str) -> str:
    """The text of an element of the page that has loaded (a node of the document being
    replaced, after a navigation or a resize, is looked for again)."""
    from selenium.common.exceptions import WebDriverException

    for attempt in range(10):
        try:
            found: str = visit.find(css).text
            return found
        except WebDriverException as exc:
            if attempt == 9 or "does not belong to the document" not in str(exc):
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def done(visit: Visit) -> str:
    """The page's confirmation line."""
    return text(visit, "p.done[role='status']")


def test_an_operator_manages_segments_projects_and_the_archive(
    browser: Any, tmp_path: Path
) -> None:
    with prepared(tmp_path) as (central, _relay):
        visit = Visit(browser, central.url, tmp_path / "screenshots")
        manage(visit, central)
        narrow(visit, central)
    if os.environ.get("SAVE_TEST_ARTIFACTS"):
        shutil.copytree(visit.shots, ARTIFACTS / "web-admin", dirs_exist_ok=True)


def manage(visit: Visit, central: Service) -> None:
    visit.sign_in(ADMIN)

    # a segment: a wrong value refused in the API's words, kept as typed, then made
    visit.click("nav a[href='/segments']")
    visit.click("a[href='/segments/new']")
    visit.find("#name").send_keys("nordics")
    visit.find("#c0-context").send_keys("country")
    visit.find("#c0-values").send_keys("NO\nSE")
    visit.click("button[name='more']")
    visit.find("#c1-context").send_keys("age")
    visit.find("#c1-operator option[value='NUM_GT']").click()
    visit.find("#c1-values").send_keys("old")
    visit.click("button[name='save']:not(.visually-hidden)")
    assert "NUM_GT needs a decimal number, not 'old'" in text(visit, "p.error")
    assert visit.find("#c0-values").get_attribute("value") == "NO\nSE"
    visit.seen("20-segment-refused")
    visit.find("#c1-values").clear()
    visit.find("#c1-values").send_keys("17")
    visit.click("button[name='save']:not(.visually-hidden)")
    assert done(visit) == "Created the segment nordics"
    table = text(visit, "table.stacked")
    assert "country in NO, SE" in table and "age > 17" in table
    visit.seen("21-segments")
    visit.click("a[href^='/segments/']:not([href='/segments/new'])")
    visit.find("input[name='c1-remove']").click()  # a checkbox: no new page
    visit.click("button[name='save']:not(.visually-hidden)")
    assert done(visit) == "Saved the segment nordics"
    assert "age" not in text(visit, "table.stacked")
    visit.click("button[aria-label='Delete segment nordics']")
    assert done(visit) == "Deleted the segment nordics"
    assert "No segments yet." in visit.driver.page_source

    # a project and an environment, enabled there with a default strategy, then removed
    visit.click("nav a[href='/projects']")
    visit.find("#id").send_keys("shop")
    visit.find("#name").send_keys("Shop")
    visit.click("form[action='/projects'] button")
    assert done(visit) == "Created the project Shop (shop)"
    visit.click("a[href='/environments']")
    visit.find("#name").send_keys("staging")
    visit.find("#type").send_keys("test")
    visit.click("form[action='/environments'] button")
    assert done(visit) == "Created the environment staging"
    visit.go("/projects/shop")
    from selenium.webdriver.support.select import Select

    Select(visit.find("#environment")).select_by_visible_text("staging")
    visit.click("form[action='/projects/shop/environments'] button")
    assert done(visit) == "Enabled staging in shop"
    rollout = visit.find("#rollout-1")
    rollout.clear()
    rollout.send_keys("25")
    visit.click("button[aria-label^='Save the default strategy']")
    assert "now get 25 % by default" in done(visit)
    assert "25 %" in text(visit, "section.card")
    visit.seen("22-project")
    visit.click("button[aria-label='Remove staging from Shop']")
    assert text(visit, "h1") == "Remove staging from Shop?"
    visit.seen("23-remove-environment")
    visit.click("input[name='confirm'] ~ button")
    assert done(visit) == "Removed staging from shop"
    assert call(f"{central.url}/api/admin/projects/shop", ADMIN)[1]["environments"] == []

    # the archive: a flag archived through the API, revived from the page
    features = f"{central.url}/api/admin/projects/default/features"
    assert call(f"{features}/search-v2", ADMIN, method="DELETE")[0] == 202
    visit.click("nav a[href='/archive']")
    assert "search-v2" in visit.seen("24-archive")
    visit.click("button[aria-label='Revive search-v2']")
    assert done(visit) == "Revived search-v2: it is off in every environment"
    assert call(f"{features}/search-v2", ADMIN)[1]["archived"] is False

    # a path that is no page: an HTML page with the menu, not a JSON body
    visit.go("/no/such/page")
    assert text(visit, "h1") == "Not found"
    assert visit.find("nav a[href='/segments']")
    visit.seen("25-not-found")

    # the key this session signed in with: its revoke asks with a warning
    visit.go("/keys")
    tokens = call(f"{central.url}/api/admin/api-tokens", ADMIN)[1]["tokens"]
    [mine] = [t["id"] for t in tokens if t["type"] == "admin"]
    assert "this session's key" in text(visit, f"tr:has(form[action='/keys/{mine}/revoke'])")
    visit.click(f"form[action='/keys/{mine}/revoke'] button")
    assert "This is the key you signed in with" in text(visit, "p.warning")
    visit.seen("26-revoke-own-key")
    visit.click("a[href='/keys']")  # cancelled: still signed in
    assert visit.driver.current_url.endswith("/keys")

    # the switch's confirmation line
    visit.go("/")
    visit.click("button[aria-label^='checkout in development is on']")
    assert done(visit) == "Turned off checkout in development"


def narrow(visit: Visit, central: Service) -> None:
    """Every page at 390 px: nothing wider than the window, every control named, and
    the revoke buttons reached with the Tab key."""
    pages = [
        "/",
        "/flags/checkout",
        "/playground?userId=user-7",
        "/applications",
        "/relays",
        "/unknown-flags",
        "/segments",
        "/segments/new",
        "/projects",
        "/projects/default",
        "/environments",
        "/archive",
        "/keys",
        "/no/such/page",
    ]
    segment = {
        "name": "enterprise-customers-in-the-nordics",
        "constraints": [
            {"contextName": "country", "operator": "IN", "values": ["NO", "SE", "DK", "FI", "IS"]},
            {"contextName": "email", "operator": "STR_ENDS_WITH", "values": ["@example.com"]},
        ],
    }
    status, made = call(f"{central.url}/api/admin/segments", ADMIN, segment)
    assert status == 201
    pages.insert(pages.index("/segments/new"), f"/segments/{made['id']}")
    cdp = visit.driver.execute_cdp_cmd
    metrics = {"width": NARROW, "height": 844, "deviceScaleFactor": 1, "mobile": False}

    def check(name: str) -> None:
        """The page shown fits 390 px and names its controls; its screenshot saved."""
        wide, window, sideways = visit.driver.execute_script(SIDEWAYS)
        assert window == NARROW and wide <= window, (name, wide, window)
        assert sideways == [], (name, sideways)  # nor a table scrolled within its box
        assert visit.driver.execute_script(UNNAMED) == [], name
        broken = visit.driver.execute_script(BROKEN_WORDS)
        visit.seen(f"30-narrow-{name}", width=NARROW)
        cdp("Emulation.setDeviceMetricsOverride", metrics)  # the screenshot reset it
        assert broken == [], (name, broken)  # tables wrap between words

    cdp("Emulation.setDeviceMetricsOverride", metrics)
    for n, path in enumerate(pages):
        visit.go(path)
        check(f"{n:02}-{path.strip('/').split('?')[0].replace('/', '-') or 'flags'}")
    visit.go("/keys")
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    body = visit.find("body")
    body.send_keys(Keys.TAB)
    for _ in range(200):
        active = visit.driver.switch_to.active_element
        if (active.get_attribute("aria-label") or "").startswith("Revoke key"):
            break
        active.send_keys(Keys.TAB)
    else:
        pytest.fail("no revoke button reached by Tab")
    assert active.is_displayed() and active.rect["x"] + active.rect["width"] <= NARROW
    old = visit.find("html")
    active.send_keys(Keys.ENTER)  # pressed by keyboard: the confirmation
    WebDriverWait(visit.driver, 30).until(expected_conditions.staleness_of(old))
    assert "Revoke this key?" in text(visit, "h1")
    check("20-revoke-confirm")
    visit.click("a[href='/keys']")
    visit.find("#name").send_keys("narrow")
    visit.click("form[action='/keys'] button")
    check("21-key-created")
    visit.click("form.signout button")
    check("22-sign-in")
    cdp("Emulation.clearDeviceMetricsOverride", {})
