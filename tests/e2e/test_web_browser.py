"""The web page in a real headless Chromium (the ``browser`` fixture of chromium.py: Debian's
``chromium`` and ``chromium-driver``, driven by Selenium), against real processes: a
standalone and a relay in front of it.

A screenshot of every page is saved under the test's tmp dir, and copied to
``tests/artifacts/`` when ``SAVE_TEST_ARTIFACTS`` is set. Without Chromium and its driver
the tests are skipped, except under CI=true (``.ci/run`` installs them), where they fail.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from browserkit import ADMIN, ARTIFACTS, BROKEN_WORDS, CLIENT, Visit, call, prepared
from service import Service, get_json, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process]


def features(central: Service) -> dict[str, bool]:
    body = get_json(f"{central.url}/api/client/features", CLIENT)
    return {f["name"]: f["enabled"] for f in body["features"]}


def test_an_operator_uses_the_web_page(browser: Any, tmp_path: Path) -> None:
    with prepared(tmp_path) as (central, relay):
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
