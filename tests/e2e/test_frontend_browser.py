"""The real browser SDK (npm ``unleash-proxy-client``, its browser build) in a page of a real
headless Chromium (chromium.py), against real processes: a standalone, and a relay in front
of it. The page comes from a small HTTP server of its own, on another port than the
service's: every call of the SDK is a cross-origin one, CORS and all.

For several users the SDK evaluates the flags as they were configured (expected answers come
from the configuration and Unleash's MurmurHash3 bucketing, not from our code), sees a flag
turned off after its refresh, sends its metrics (stored at the standalone, carried there by
the relay), and keeps its flags through an outage of the standalone, a freshly loaded page
too (from the relay's copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from flagkit import env_path, http
from pagekit import (
    ADMIN,
    CENTRAL_ENV,
    CLIENT,
    USERS,
    Page,
    build_flags,
    expected,
    page_origin,  # noqa: F401  (the fixture)
)
from service import Service, relay_env, running, scrape, settle, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process]


def test_the_rollout_splits_these_users() -> None:
    """The users are chosen so that the 50 % rollout has some on each side."""
    assert len({expected(user)["half"] for user in USERS}) == 2
    assert len({expected(user)["colours"]["name"] for user in USERS}) == 2


def frontend_polls(service: Service) -> float:
    return sum(
        scrape(service.url, "relay_http_requests_total", route="/api/frontend", status=status)
        for status in ("200", "304")
    )


def test_the_browser_sdk_against_a_standalone_and_a_relay(
    browser: Any,
    page_origin: str,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> None:
    with running(tmp_path / "central", env=CENTRAL_ENV, name="central") as central:
        build_flags(central.url)
        wanted = {user: expected(user) for user in USERS}

        # at the standalone: each user's flags, kept over refreshes; the counts stored
        page = Page(browser, page_origin, central.url)
        assert page.answers() == wanted
        polls = frontend_polls(central)
        wait_until(lambda: frontend_polls(central) >= polls + len(USERS) * 2, "SDKs refreshed")
        assert page.answers() == wanted
        counted = page.count(3)
        settle(central, ADMIN, "counted", counted)
        page.stop()

        env = relay_env(central.url, CLIENT, RELAY_FEATURES_REFRESH_INTERVAL="1")
        with running(tmp_path / "relay", env=env, name="relay") as relay:
            # through the relay: the same answers, a change after the refresh, the counts
            page = Page(browser, page_origin, relay.url)
            assert page.answers() == wanted
            assert http("POST", f"{central.url}{env_path('vip')}/off", key=ADMIN)[0] == 200
            vip_off = {user: expected(user, vip=False) for user in USERS}
            wait_until(lambda: page.answers() == vip_off, "the SDKs saw vip turned off")
            counted += page.count(2)
            settle(central, ADMIN, "counted", counted, relay=(relay, CLIENT))

            # the standalone goes away: the running SDKs keep their flags over refreshes, and
            # a freshly loaded page gets them from the relay's copy
            central.stop()
            polls = frontend_polls(relay)
            wait_until(lambda: frontend_polls(relay) >= polls + len(USERS) * 2, "SDKs refreshed")
            assert page.answers() == vip_off
            page.stop()
            assert Page(browser, page_origin, relay.url).answers() == vip_off
            assert (
                scrape(relay.url, "relay_http_requests_total", route="/api/frontend", status="500")
                == 0
            )
