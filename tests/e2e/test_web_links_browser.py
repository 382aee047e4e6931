"""A dependency between flags made on the page in a real headless Chromium (issue 23), and
respected by the real Python SDK: the child is off while its parent is off, on once the
parent is on. Then environment variants set, the child archived and revived, and every
change of the test on the event log page filtered by the flag; the new pages at 390 px:
no sideways scroll, every control named. Screenshots under the test's tmp dir
(``tests/artifacts/web-links/`` with ``SAVE_TEST_ARTIFACTS``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from browserkit import ARTIFACTS, NARROW, SIDEWAYS, UNNAMED, Visit, call, choose, done, fill, served
from sdks import Check, python_evaluate, quiet_sdk_logs
from service import Service, get_json, running, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process]

ADMIN = "*:*.links-browser-admin-0123456789abcdef"
CLIENT = "default:development.links-browser-client-0123456789"
USERS = [f"user-{n}" for n in range(20)]


def child_on(central: Service, tmp_path: Path) -> list[bool]:
    checks = [Check("child", {"userId": u}) for u in USERS]
    return [bool(on) for on in python_evaluate(central.url, CLIENT, checks, tmp_path)]


def test_a_dependency_made_on_the_page_is_respected_by_an_sdk_and_logged(
    browser: Any, tmp_path: Path
) -> None:
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
    with running(tmp_path / "central", env=env, name="central") as central:
        visit = Visit(browser, central.url, tmp_path / "screenshots")
        visit.sign_in(ADMIN)
        for name in ("parent", "child"):
            visit.go("/new-flag")
            fill(visit, "#name", name)
            visit.click("form[action='/flags'] button[type='submit']")
            assert done(visit) == f"Created {name} in project default"

        # the child on in development, depending on its parent (off)
        visit.click("button[aria-label^='child in development is off']")
        assert done(visit) == "Turned on child in development"
        choose(visit, "#parent", "parent")
        choose(visit, "#parent-enabled", "true")
        visit.click("form[action='/flags/child/dependencies'] button")
        assert done(visit) == "child is now served only while parent is on"
        dependency = visit.find("section[aria-labelledby='dependency']").text
        assert "Served only while parent is on." in dependency, dependency
        visit.seen("01-dependency")
        wait_until(lambda: "dependencies" in served(central, CLIENT)["child"], "the SDKs get it")
        quiet_sdk_logs()
        assert child_on(central, tmp_path) == [False] * len(USERS)  # parent off: child off

        visit.go("/flags/parent")
        assert "Flags that depend on it: child." in visit.find("main").text
        visit.click("button[aria-label^='parent in development is off']")
        assert done(visit) == "Turned on parent in development"
        assert child_on(central, tmp_path) == [True] * len(USERS)  # parent on: child on

        # environment variants of the child, in development
        visit.go("/flags/child")
        visit.click("a[aria-label='Edit the environment variants of child in development']")
        fill(visit, "#v0-name", "blue")
        fill(visit, "#v0-share", "30")
        visit.click("button[name='more'][value='variant']")
        fill(visit, "#v1-name", "green")
        visit.seen("02-environment-variants")
        visit.click("p.row-actions button[name='save']")
        assert done(visit) == "Set 2 environment variants of child in development"
        assert "blue 30 %, green 70 %" in visit.find("section.environment").text
        variants = [(v["name"], v["weight"]) for v in served(central, CLIENT)["child"]["variants"]]
        assert variants == [("blue", 300), ("green", 700)]

        # archived (asked first), then revived from the archive
        visit.click("form[action='/flags/child/archive'] button")
        visit.click("input[name='confirm'] ~ button")
        assert done(visit) == "Archived child"
        wait_until(
            lambda: "child" not in served(central, CLIENT), "the archived flag is not served"
        )
        visit.click("nav a[href='/archive']")
        visit.seen("03-archive")
        visit.click("button[aria-label='Revive child']")
        assert done(visit) == "Revived child: it is off in every environment"
        wait_until(lambda: "child" in served(central, CLIENT), "the revived flag is served")

        # every change of the test, from the flag's page to its event log
        visit.go("/flags/child")
        visit.click("a[href='/events?feature=child']")
        said = [li.text for li in visit.driver.find_elements("css selector", "li.event > p")]
        logged = get_json(f"{central.url}/api/admin/events?feature=child", ADMIN)["events"]
        who = logged[0]["createdBy"]  # the signed-in key's name, as the admin API says it
        assert {e["createdBy"] for e in logged} == {who}
        assert [line.split(" · ")[0] for line in said] == [
            f"{who} revived child",
            f"{who} archived child",
            f"{who} set the variants of child in development",
            f"{who} made child depend on another flag",
            f"{who} turned on child in development",
            f"{who} created child",
        ], said
        assert all("ago" in line or "just now" in line for line in said), said
        shown = visit.find("li.event:nth-child(4) ul.changes").get_attribute("textContent")
        changes = " ".join(shown.split())  # as a screen reader says it
        assert 'feature: before none → after "parent"' in changes, changes
        visit.seen("04-events")

        narrow(visit, central)
    if os.environ.get("SAVE_TEST_ARTIFACTS"):
        shutil.copytree(visit.shots, ARTIFACTS / "web-links", dirs_exist_ok=True)


def narrow(visit: Visit, central: Service) -> None:
    """The pages of this part at 390 px: nothing wider than the window, controls named."""
    features = f"{central.url}/api/admin/projects/default/features"
    status, _ = call(features, ADMIN, {"name": "old"})
    assert status in (200, 201)
    status, _ = call(f"{features}/old", ADMIN, method="DELETE")  # a row for the archive page
    assert status == 202, status
    cdp = visit.driver.execute_cdp_cmd
    metrics = {"width": NARROW, "height": 844, "deviceScaleFactor": 1, "mobile": False}
    cdp("Emulation.setDeviceMetricsOverride", metrics)
    pages = [
        "/flags/child",
        "/flags/parent",
        "/flags/child/environments/development/variants",
        "/events",
        "/events?feature=child",
        "/projects/default",
        "/environments",
        "/archive",
    ]
    for n, path in enumerate(pages):
        visit.go(path)
        wide, window, sideways = visit.driver.execute_script(SIDEWAYS)
        assert window == NARROW and wide <= window, (path, wide, window)
        assert sideways == [], (path, sideways)
        assert visit.driver.execute_script(UNNAMED) == [], path
        name = path.strip("/").split("?")[0].replace("/", "-")
        visit.seen(f"10-narrow-{n:02}-{name}", width=NARROW)
        cdp("Emulation.setDeviceMetricsOverride", metrics)
