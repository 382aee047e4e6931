"""The real browser SDK (npm ``unleash-proxy-client``) in a page served to Chromium: the
page, its origin (the ``page_origin`` fixture) and the flags it is asked about."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import origin
from flagkit import FEATURES, env_path, even_variants, http
from sdks import VARIANT_SEED, bucket

ADMIN = "*:*.frontend-browser-admin-0123456789abcdef"
CLIENT = "default:development.frontend-browser-client-0123456789"
FRONTEND = "default:development.frontend-browser-front-0123456789"
CENTRAL_ENV = {
    "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
    "RELAY_INIT_CLIENT_API_TOKENS": CLIENT,
    "RELAY_INIT_FRONTEND_API_TOKENS": FRONTEND,
}


USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]
VIPS = {"alice", "carol"}
PAYLOADS = {
    "blue": {"type": "json", "value": '{"color": "#00f"}'},
    "green": {"type": "string", "value": "go"},
}


FLAGS: dict[str, dict[str, Any]] = {
    "vip": {"name": "userWithId", "parameters": {"userIds": ",".join(sorted(VIPS))}},
    "half": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "50", "stickiness": "userId", "groupId": "half"},
    },
    "colours": {
        "name": "flexibleRollout",
        "parameters": {"rollout": "100", "stickiness": "userId", "groupId": "colours"},
        "variants": even_variants(PAYLOADS),
    },
    "counted": {"name": "default"},
}


PAGE = b"""<!doctype html><meta charset="utf-8"><title>shop</title>
<script src="/unleash.js"></script>
<script>
// one SDK per user, as each user's browser would have; flags kept in memory only, so that
// a fresh page has nothing but what the server answers
window.clients = {};
window.startClient = async (user, url, clientKey) => {
  const client = new unleash.UnleashClient({
    url, clientKey, appName: 'shop-web', refreshInterval: 1, metricsInterval: 1,
    context: {userId: user}, storageProvider: new unleash.InMemoryStorageProvider(),
  });
  window.clients[user] = client;
  await client.start();
  const error = client.getError();  // {type, code} or {type, error}: say which
  const why = error ? `${error.type}: ${error.code ?? error.error}` : null;
  return {ready: client.isReady(), error: why};
};
window.answers = () => Object.fromEntries(Object.entries(window.clients).map(([user, c]) => [
  user, {vip: c.isEnabled('vip'), half: c.isEnabled('half'), colours: c.getVariant('colours')},
]));
window.count = (n) => {
  for (const c of Object.values(window.clients)) for (let i = 0; i < n; i++) c.isEnabled('counted');
};
</script>"""


def expected(user: str, vip: bool = True) -> dict[str, Any]:
    """What the flags say for ``user`` (``vip``: whether flag vip is on)."""
    colour = "blue" if bucket("colours", user, 1000, VARIANT_SEED) <= 500 else "green"
    return {
        "vip": vip and user in VIPS,
        "half": bucket("half", user) <= 50,
        "colours": {
            "name": colour,
            "enabled": True,
            "feature_enabled": True,
            "featureEnabled": True,  # Unleash 8 sends both spellings
            "payload": PAYLOADS[colour],
        },
    }


@pytest.fixture
def page_origin(node_sdk: Path) -> Iterator[str]:
    """The shop's own web server: the page, and the SDK's browser build (from npm)."""
    sdk = (node_sdk / "unleash-proxy-client" / "build" / "main.min.js").read_bytes()
    files = {"/": (PAGE, "text/html"), "/unleash.js": (sdk, "text/javascript")}
    with origin(lambda path: files.get(path, (b"", "text/plain"))) as url:
        yield url


class Page:
    """The shop's page in the browser, its SDKs started against ``url`` (the Frontend API,
    or ``api`` and ``key`` another, such as the Unleash Proxy's paths)."""

    def __init__(
        self, driver: Any, origin: str, url: str, api: str = "/api/frontend", key: str = FRONTEND
    ) -> None:
        self.driver, self.url = driver, url
        driver.set_script_timeout(60)
        self._load(f"{origin}/")
        for user in USERS:
            started = driver.execute_async_script(
                "const done = arguments[arguments.length - 1];"
                "startClient(arguments[0], arguments[1], arguments[2]).then(done,"
                " (e) => done({ready: false, error: String(e)}));",
                user,
                f"{url}{api}",
                key,
            )
            assert started == {"ready": True, "error": None}, (user, started)

    def _load(self, page: str) -> None:
        """The shop's page, loaded again should the browser show anything else (a load that
        failed leaves a page where ``startClient`` is not defined)."""
        for _ in range(3):
            self.driver.get(page)
            if self.driver.execute_script("return typeof window.startClient") == "function":
                return
        shown = self.driver.execute_script("return document.documentElement.outerHTML")
        raise AssertionError(f"the shop's page did not load: {shown[:500]}")

    def answers(self) -> dict[str, Any]:
        got: dict[str, Any] = self.driver.execute_script("return answers();")
        return got

    def count(self, times: int) -> int:
        """Each user's SDK asks flag ``counted`` ``times`` times: how many yes it counts."""
        self.driver.execute_script("count(arguments[0]);", times)
        return times * len(USERS)

    def stop(self) -> None:
        self.driver.execute_script("Object.values(clients).forEach((c) => c.stop());")


def build_flags(url: str) -> None:
    for name, strategy in FLAGS.items():
        assert (
            http("POST", f"{url}{FEATURES.format(project='default')}", {"name": name}, ADMIN)[0]
            == 201
        )
        status, answer = http("POST", f"{url}{env_path(name)}/strategies", strategy, ADMIN)
        assert status == 200, answer
        assert http("POST", f"{url}{env_path(name)}/on", key=ADMIN)[0] == 200
