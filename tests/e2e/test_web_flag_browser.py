"""A flag made and managed from the web page in a real headless Chromium (``browser``
fixture), against the real program: created, given a 50 % rollout with a constraint and two
variants through the forms, evaluated by the real Python SDK for 400 fixed users, its
strategies reordered, archived. Screenshots under the test's tmp dir (``tests/artifacts/``
with ``SAVE_TEST_ARTIFACTS``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from browserkit import ARTIFACTS, Visit, choose, done, fill, served
from sdks import Check, bucket, python_evaluate, quiet_sdk_logs
from service import running, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process]

ADMIN = "*:*.flag-browser-admin-0123456789abcdef"
CLIENT = "default:development.flag-browser-client-0123456789"
FLAG = "new-checkout"
USERS = [f"user-{n}" for n in range(400)]


def test_a_flag_is_made_rolled_out_reordered_and_archived_from_the_page(
    browser: Any, tmp_path: Path
) -> None:
    env = {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT}
    with running(tmp_path / "central", env=env, name="central") as central:
        visit = Visit(browser, central.url, tmp_path / "screenshots")
        visit.sign_in(ADMIN)

        # created through its form
        visit.click("a[href='/new-flag']")
        visit.seen("01-new-flag")
        fill(visit, "#name", FLAG)
        choose(visit, "#type", "experiment")
        fill(visit, "#description", "The new checkout")
        visit.click("form[action='/flags'] button[type='submit']")
        assert done(visit) == f"Created {FLAG} in project default"

        # a 50 % rollout by userId, for country NO only, with two variants
        visit.click("form[action$='/environments/development/strategies/new'] button")
        fill(visit, "#rollout", "50")
        fill(visit, "#stickiness", "userId")
        fill(visit, "#c0-context", "country")
        choose(visit, "#c0-operator", "IN")
        fill(visit, "#c0-values", "NO")
        fill(visit, "#v0-name", "blue")
        visit.click("button[name='more'][value='variant']")  # a row for the second one
        assert visit.find("#v0-name").get_attribute("value") == "blue"
        fill(visit, "#v1-name", "green")
        visit.seen("02-strategy-form")
        visit.seen("02-strategy-form-narrow", width=390)
        visit.click("form.strategy button[name='save']")
        assert "Added the gradual rollout strategy" in done(visit)
        words = visit.find("ol.strategies li").text
        assert "50 % of users by userId, country in NO" in words, words
        assert "Variants: blue 50 %, green 50 %" in words, words
        visit.click(f"button[aria-label^='{FLAG} in development is off']")
        assert done(visit) == f"Turned on {FLAG} in development"
        visit.seen("03-flag-rolled-out")

        quiet_sdk_logs()
        norway = [Check(FLAG, {"userId": u, "properties": {"country": "NO"}}) for u in USERS]
        sweden = [Check(FLAG, {"userId": u, "properties": {"country": "SE"}}) for u in USERS[:50]]
        answers = python_evaluate(central.url, CLIENT, norway + sweden, tmp_path)
        enabled = answers[: len(USERS)]
        assert enabled == [bucket(FLAG, u) <= 50 for u in USERS]  # the SDK's own hashing
        assert 160 <= sum(enabled) <= 240, sum(enabled)
        assert not any(answers[len(USERS) :])  # the constraint holds
        picked = python_evaluate(
            central.url, CLIENT, [Check(c.toggle, c.context, True) for c in norway], tmp_path
        )
        names = [v["name"] for v, on in zip(picked, enabled, strict=True) if on]
        assert set(names) == {"blue", "green"}
        assert 0.35 <= names.count("blue") / len(names) <= 0.65, names.count("blue")
        assert all(v["name"] == "disabled" for v, on in zip(picked, enabled, strict=True) if not on)

        # a second strategy, then moved first: the SDKs' order follows
        choose(visit, "#kind-1", "userWithId")
        visit.click("form[action$='/environments/development/strategies/new'] button")
        fill(visit, "#listed", "vip-1, vip-2")
        visit.click("form.strategy button[name='save']")
        first = [s["name"] for s in served(central, CLIENT)[FLAG]["strategies"]]
        assert first == ["flexibleRollout", "userWithId"]
        visit.click("button[aria-label^='Move strategy 2'][aria-label$='in development up']")
        assert "up, to place 1" in done(visit)
        wait_until(
            lambda: (
                [s["name"] for s in served(central, CLIENT)[FLAG]["strategies"]]
                == ["userWithId", "flexibleRollout"]
            ),
            "the SDKs' order follows",
        )
        visit.seen("04-reordered")
        visit.seen("04-reordered-narrow", width=390)
        wide = visit.driver.execute_script(
            "return document.documentElement.scrollWidth > window.innerWidth"
        )
        assert not wide, "the flag's page scrolls sideways at 390 px"

        # archived from its page (asked first): no longer served
        visit.click(f"form[action='/flags/{FLAG}/archive'] button")
        visit.seen("05-archive-confirm")
        visit.click("input[name='confirm'] ~ button")
        assert done(visit) == f"Archived {FLAG}"
        wait_until(lambda: FLAG not in served(central, CLIENT), "the archived flag is not served")
        visit.seen("06-archived")
    if os.environ.get("SAVE_TEST_ARTIFACTS"):
        shutil.copytree(visit.shots, ARTIFACTS / "web-flags", dirs_exist_ok=True)
