"""The web page over HTTP (issue 17), on both backends: sign-in and its session cookie,
CSRF, the pages, and that the admin key appears in no page. The browser tests
(``test_web_browser.py``) drive the same pages in Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, MakeClient, auth, bulk, metric
from webkit import FEATURES, csrf, page, sign_in

PAGES = (
    "/",
    "/flags/checkout",
    "/playground",
    "/applications",
    "/relays",
    "/unknown-flags",
    "/keys",
)


async def test_pages_need_a_session(client: Any) -> None:
    for path in PAGES:
        response = await client.get(path, allow_redirects=False)
        assert response.status == 303
        assert response.headers["Location"].startswith("/login?next=")
    form = await page(client, "/login")
    assert 'type="password"' in form and '<label for="key">' in form


async def test_sign_in_sets_a_strict_http_only_cookie_and_never_shows_the_key(
    client: Any,
) -> None:
    response = await sign_in(client, next_="/keys")
    assert response.status == 303 and response.headers["Location"] == "/keys"
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert "Max-Age=28800" in cookie and "Secure" not in cookie  # plain HTTP here
    assert ADMIN_KEY not in cookie
    await client.post(
        "/api/client/metrics/bulk", json=bulk([metric("checkout", yes=2)]), headers=auth(DEV_KEY)
    )
    for path in PAGES:
        html = await page(client, path)
        assert ADMIN_KEY not in html and ADMIN_KEY.split(".", 1)[1] not in html
        assert "no-store" in (await client.get(path)).headers["Cache-Control"]


async def test_a_wrong_or_client_key_is_refused_without_echoing_it(client: Any) -> None:
    for key in ("*:*.wrong-secret-0123456789", DEV_KEY):
        response = await sign_in(client, key)
        html = await response.text()
        assert response.status == 401 and "not an admin key" in html
        assert key not in html and "Set-Cookie" not in response.headers
    assert (await client.get("/", allow_redirects=False)).status == 303


async def test_sign_in_attempts_spend_the_failed_key_budget(make_client: MakeClient) -> None:
    client = await make_client(auth_failure_limit=3, auth_failure_window=3600)
    for _ in range(3):
        assert (await sign_in(client, "*:*.guess-0123456789")).status == 401
    refused = await sign_in(client, "*:*.guess-again-0123456789")
    assert refused.status == 429 and "Too many invalid" in await refused.text()
    assert (await sign_in(client)).status == 303  # a key known valid still passes


async def test_only_local_places_are_gone_back_to(client: Any) -> None:
    hostile = ("//evil.example/x", "https://evil.example/", "/\\evil.example", "/\t/evil.example")
    for target in hostile:
        response = await sign_in(client, next_=target)
        assert response.headers["Location"] == "/"


async def test_writes_need_the_session_csrf_token(client: Any) -> None:
    created = await client.post(FEATURES, json={"name": "checkout"}, headers=auth(ADMIN_KEY))
    assert created.status == 201
    await sign_in(client)
    html = await page(client, "/")
    action = "/flags/checkout/environments/development"
    assert f'action="{action}"' in html
    forged = await client.post(action, data={"on": "true", "csrf": "forged"}, allow_redirects=False)
    assert forged.status == 403
    missing = await client.post(action, data={"on": "true"}, allow_redirects=False)
    assert missing.status == 403
    done = await client.post(
        action, data={"on": "true", "csrf": csrf(html), "next": "/?q=check"}, allow_redirects=False
    )
    assert done.status == 303 and done.headers["Location"] == "/?q=check"
    state = await client.get(
        f"{FEATURES}/checkout/environments/development", headers=auth(ADMIN_KEY)
    )
    assert (await state.json())["enabled"] is True


async def test_sign_out_ends_the_session(client: Any) -> None:
    await sign_in(client)
    html = await page(client, "/")
    cookie = client.session.cookie_jar.filter_cookies(client.make_url("/"))["relay_session"].value
    out = await client.post("/logout", data={"csrf": csrf(html)}, allow_redirects=False)
    assert out.status == 303 and out.headers["Location"] == "/login"
    client.session.cookie_jar.update_cookies({"relay_session": cookie})  # replayed
    assert (await client.get("/", allow_redirects=False)).status == 303


async def test_revoking_the_admin_key_ends_its_sessions_on_every_instance(
    make_client: MakeClient, tmp_path: Path
) -> None:
    first = await make_client(tmp_path / "shared")
    second = await make_client(tmp_path / "shared")
    made = await first.post(
        "/api/admin/api-tokens", json={"type": "admin"}, headers=auth(ADMIN_KEY)
    )
    key = await made.json()
    assert (await sign_in(second, key["secret"])).status == 303
    await page(second, "/keys")  # the session works on the second instance
    revoked = await first.delete(f"/api/admin/api-tokens/{key['id']}", headers=auth(ADMIN_KEY))
    assert revoked.status == 200
    assert (await second.get("/keys", allow_redirects=False)).status == 303


async def test_an_expired_session_is_refused(make_client: MakeClient) -> None:
    client = await make_client(web_session_ttl=0.001)
    assert (await sign_in(client)).status == 303
    assert (await client.get("/", allow_redirects=False)).status == 303


async def test_cookies_are_secure_behind_a_tls_proxy(make_client: MakeClient) -> None:
    client = await make_client(web_secure_cookies=True)
    assert "Secure" in (await sign_in(client)).headers["Set-Cookie"]


async def test_keys_are_created_once_shown_and_revoked_from_the_page(client: Any) -> None:
    await sign_in(client)
    html = await page(client, "/keys")
    made = await client.post(
        "/keys",
        data={
            "csrf": csrf(html),
            "type": "client",
            "environment": "production",
            "project": "default",
            "name": "from-the-page",
        },
    )
    created = await made.text()
    assert made.status == 201
    secret = re.search(r'value="(default:production\.[0-9a-f]{64})"', created)
    assert secret, created
    assert secret.group(1) not in await page(client, "/keys")  # shown once only
    assert (
        await client.post("/api/client/metrics/bulk", json=bulk(), headers=auth(secret.group(1)))
    ).status == 202
    listed = await (await client.get("/api/admin/api-tokens", headers=auth(ADMIN_KEY))).json()
    key_id = next(t["id"] for t in listed["tokens"] if t["tokenName"] == "from-the-page")
    asked = await client.post(f"/keys/{key_id}/revoke", data={"csrf": csrf(html)})
    assert asked.status == 200 and "Revoke this key?" in await asked.text()
    assert (
        await client.post("/api/client/metrics/bulk", json=bulk(), headers=auth(secret.group(1)))
    ).status == 202
    revoke = await client.post(
        f"/keys/{key_id}/revoke", data={"csrf": csrf(html), "confirm": "yes"}, allow_redirects=False
    )
    assert revoke.status == 303
    assert (
        await client.post("/api/client/metrics/bulk", json=bulk(), headers=auth(secret.group(1)))
    ).status == 401
    bad = await client.post(
        "/keys", data={"csrf": csrf(html), "type": "client", "environment": "nope"}
    )
    assert bad.status == 400 and "does not exist" in await bad.text()


async def test_page_inputs_are_escaped(client: Any) -> None:
    evil = "<script>alert(1)</script>"
    entry = metric(evil, app="<b>app</b>", yes=1)
    await client.post("/api/client/metrics/bulk", json=bulk([entry]), headers=auth(DEV_KEY))
    await sign_in(client)
    for path in ("/unknown-flags", "/?q=" + evil, "/flags/%3Cscript%3Ealert(1)%3C%2Fscript%3E"):
        html = await page(client, path)
        assert evil not in html and "<b>app</b>" not in html
        assert "&lt;script&gt;" in html or path.startswith("/?")
