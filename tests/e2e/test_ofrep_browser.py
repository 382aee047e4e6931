"""OpenFeature's web SDK with its OFREP provider (npm ``@openfeature/web-sdk``,
``@openfeature/ofrep-web-provider``, their ES modules through an import map) in a page of
a real headless Chromium (chromium.py), served by a small HTTP server on another origin
than the service's: every call is a cross-origin one, the stream's too.

Against real processes on their default worker count: a standalone, then a relay in front
of it. The provider polls not at all (its default, OFREP's ADR-0010): a change reaches the
page only through the bulk answer's ``eventStreams`` (``GET /ofrep/v1/events``), which it
follows. Through the relay the page gets the change too; once the standalone is gone, the
page keeps its flags and a freshly loaded one gets them from the relay's copy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import origin
from flagkit import FEATURES, env_path, http
from ofrepkit import every_worker_answers, readme_example
from sdks import VARIANT_SEED, WEB_DIR, WEB_PACKAGES, bucket, node_modules
from service import Service, relay_env, running, scrape, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.process]

ADMIN = "*:*.ofrep-browser-admin-0123456789abcdef"
CLIENT = "default:development.ofrep-browser-client-0123456789"
FRONT = "default:development.ofrep-browser-front-01234567890"
USERS = ["alice", "bob", "carol", "dave", "erin", "frank"]
STRATEGIES: dict[str, dict[str, Any]] = {
    "vip": {"name": "userWithId", "parameters": {"userIds": "alice,carol"}},
    "theme": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "100", "stickiness": "default", "groupId": "theme"},
        "variants": [
            {
                "name": name,
                "weight": 500,
                "weightType": "variable",
                "stickiness": "default",
                "payload": {"type": "json", "value": value},
            }
            for name, value in (("dark", '{"dark": true}'), ("light", '{"dark": false}'))
        ],
    },
    "new-checkout": {"name": "default"},  # the README's example reads it
    "banner": {
        "name": "default",
        "variants": [
            {
                "name": "hello",
                "weight": 1000,
                "weightType": "variable",
                "stickiness": "default",
                "payload": {"type": "string", "value": "Hello"},
            }
        ],
    },
}

_MODULES = {
    "@openfeature/core": "@openfeature/core/dist/esm/index.js",
    "@openfeature/web-sdk": "@openfeature/web-sdk/dist/esm/index.js",
    "@openfeature/ofrep-core": "@openfeature/ofrep-core/index.esm.js",
    "@openfeature/ofrep-web-provider": "@openfeature/ofrep-web-provider/index.esm.js",
}
IMPORTS = ",".join(f'"{name}": "/m/{path}"' for name, path in _MODULES.items())
PAGE = """<!doctype html><meta charset="utf-8"><title>shop</title>
<script type="importmap">{"imports": {IMPORTS}}</script>
<script type="module">
import { OpenFeature } from '@openfeature/web-sdk';
import { OFREPWebProvider } from '@openfeature/ofrep-web-provider';
// the provider's defaults (no polling; the stream the server names), its flags held in
// memory only, so that a fresh page has nothing but what the server answers
window.start = async (url, key, user) => {
  await OpenFeature.setContext({ targetingKey: user });
  const provider = new OFREPWebProvider({
    baseUrl: url, headers: [['Authorization', key]], cacheMode: 'disabled',
  });
  await OpenFeature.setProviderAndWait(provider);
  return OpenFeature.getClient().providerStatus;
};
window.as = (user) => OpenFeature.setContext({ targetingKey: user });
window.answers = () => {
  const client = OpenFeature.getClient();
  const banner = client.getStringDetails('banner', 'fallback');
  return {
    vip: client.getBooleanValue('vip', false),
    theme: client.getObjectDetails('theme', {}).variant,
    banner: [banner.value, banner.reason],
    missing: client.getBooleanDetails('nothing', true).errorCode,
  };
};
window.ready = true;
</script>""".replace("IMPORTS", IMPORTS).encode()


def readme_page(url: str) -> bytes:
    """A page running the README's browser example, at ``url`` with the test's key, what it
    logs kept in ``window.said``."""
    example = readme_example("openfeature-web", url).replace(
        "default:development.your-frontend-key", FRONT
    )
    return (
        '<!doctype html><meta charset="utf-8"><title>readme</title>'
        f'<script type="importmap">{{"imports": {{{IMPORTS}}}}}</script>'
        "<script>window.said = []; const log = console.log;"
        " console.log = (...words) => { window.said.push(words.join(' ')); log(...words); };"
        f'</script><script type="module">\n{example}\n</script>'
    ).encode()


def expected(user: str, vip_on: bool = True) -> dict[str, Any]:
    dark = bucket("theme", user, 1000, VARIANT_SEED) <= 500
    return {
        "vip": vip_on and user in ("alice", "carol"),
        "theme": "dark" if dark else "light",
        "banner": ["Hello", "STATIC"],
        "missing": "FLAG_NOT_FOUND",
    }


def test_the_users_see_both_themes() -> None:
    assert len({expected(user)["theme"] for user in USERS}) == 2


@pytest.fixture(scope="module")
def web_sdk() -> Path:
    """node_modules with the web SDK and its provider, installed once from npm into
    tests/.node/web; skipped when npm cannot get them, except under CI=true."""
    found = node_modules(WEB_PACKAGES, WEB_DIR)
    if isinstance(found, str):
        if os.environ.get("CI") == "true":
            pytest.fail(found)
        pytest.skip(found)
    return found


PAGES: dict[str, bytes] = {"/": PAGE}
"""The origin's pages by path (a test adds the README's)."""


@pytest.fixture
def page_origin(web_sdk: Path) -> Iterator[str]:
    """The shop's own web server: the pages, and the SDK's modules (from npm)."""

    def answer(path: str) -> tuple[bytes, str]:
        if path in PAGES:
            return PAGES[path], "text/html"
        if path.startswith("/m/") and ".." not in path:
            file = web_sdk / path[3:]
            if file.is_file():
                return file.read_bytes(), "text/javascript"
        return b"", "text/plain"

    with origin(answer) as url:
        yield url


class Page:
    """The shop's page, its provider started against ``url`` for ``user``."""

    def __init__(self, driver: Any, origin: str, url: str, user: str) -> None:
        self.driver = driver
        driver.set_script_timeout(60)
        driver.get(f"{origin}/")
        wait_until(lambda: driver.execute_script("return window.ready === true"), "modules")
        status = driver.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "start(arguments[0], arguments[1], arguments[2]).then(done, (e) => done(String(e)));",
            url,
            FRONT,
            user,
        )
        assert status == "READY", status

    def answers(self) -> dict[str, Any]:
        found: dict[str, Any] = self.driver.execute_script("return answers();")
        return found

    def become(self, user: str) -> None:
        self.driver.execute_async_script(
            "const done = arguments[arguments.length - 1]; as(arguments[0]).then(done, done);",
            user,
        )


def build_flags(url: str) -> None:
    for name, strategy in STRATEGIES.items():
        body = {"name": name}
        assert http("POST", f"{url}{FEATURES.format(project='default')}", body, ADMIN)[0] == 201
        status, answer = http("POST", f"{url}{env_path(name)}/strategies", strategy, ADMIN)
        assert status == 200, answer
        assert http("POST", f"{url}{env_path(name)}/on", key=ADMIN)[0] == 200


def switch_vip(central: Service, on: bool) -> None:
    state = "on" if on else "off"
    assert http("POST", f"{central.url}{env_path('vip')}/{state}", key=ADMIN)[0] == 200


def users_and_a_change(page: Page, service: Service, central: Service) -> None:
    """Each user's flags (the provider fetches again as the context changes), then vip
    switched at the standalone: the page gets it by the stream alone."""
    for user in USERS:
        page.become(user)
        assert page.answers() == expected(user), user
    assert scrape(service.url, "relay_streams") >= 1  # the provider follows the stream
    page.become("carol")
    switch_vip(central, False)
    wait_until(lambda: page.answers() == expected("carol", vip_on=False), "vip off seen")
    switch_vip(central, True)
    wait_until(lambda: page.answers() == expected("carol"), "vip on again seen")


def test_the_web_provider_against_a_standalone_and_a_relay(
    browser: Any, page_origin: str, tmp_path: Path
) -> None:
    central_env = {
        "RELAY_WORKERS": "auto",
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
        "RELAY_INIT_FRONTEND_API_TOKENS": FRONT,
    }
    with running(tmp_path / "central", env=central_env, name="central") as central:
        build_flags(central.url)
        # the README's example, as written but for the address and the key
        PAGES["/readme"] = readme_page(central.url)
        browser.get(f"{page_origin}/readme")
        said = "return window.said.includes('new-checkout is on')"
        wait_until(lambda: browser.execute_script(said), "the README's example said on")
        page = Page(browser, page_origin, central.url, "carol")
        users_and_a_change(page, central, central)

        env = relay_env(
            central.url,
            CLIENT,
            RELAY_WORKERS="auto",
            RELAY_CLIENT_TOKENS=CLIENT,
            RELAY_FRONTEND_TOKENS=FRONT,
            RELAY_FEATURES_REFRESH_INTERVAL="1",
        )
        with running(tmp_path / "relay", env=env, name="relay") as relay:
            page = Page(browser, page_origin, relay.url, "carol")
            users_and_a_change(page, relay, central)
            # the standalone goes away: the page keeps its flags, a fresh page gets them
            # from the relay's copy
            central.stop()
            every_worker_answers(relay, FRONT)
            assert page.answers() == expected("carol")
            fresh = Page(browser, page_origin, relay.url, "bob")
            assert fresh.answers() == expected("bob")
            assert "Traceback" not in relay.logs()
