"""The confirmation line after each action on the web page (issue 23): what the form did
is said once, on the page it leads to, and a link cannot make the page claim it."""

from __future__ import annotations

from typing import Any

from conftest import ADMIN_KEY, auth
from webkit import FEATURES, csrf, page, sign_in


async def test_an_action_is_confirmed_once_on_the_next_page(client: Any) -> None:
    assert (await client.post(FEATURES, json={"name": "checkout"}, headers=auth(ADMIN_KEY))).ok
    await sign_in(client)
    html = await page(client, "/")
    assert 'class="done"' not in html
    switched = await client.post(
        "/flags/checkout/environments/production",
        data={"on": "true", "csrf": csrf(html), "next": "/"},
    )
    shown = await switched.text()
    assert switched.status == 200
    assert '<p class="done" role="status">Turned on checkout in production</p>' in shown
    assert 'class="done"' not in await page(client, "/")  # once only


async def test_the_line_cannot_be_put_in_an_address(client: Any) -> None:
    await sign_in(client)
    for path in ("/?done=Deleted+everything", "/?relay_done=Deleted+everything"):
        assert "Deleted everything" not in await page(client, path)


async def test_the_line_cannot_be_put_in_a_cookie_by_anyone_else(client: Any) -> None:
    """A cookie set from elsewhere (a sibling subdomain can set one for the parent domain,
    a page served over plain HTTP can too) is not a line this site wrote: not shown."""
    await sign_in(client)
    forged = "Revoked%20every%20key%3A%20sign%20in%20at%20evil.example"
    client.session.cookie_jar.update_cookies({"relay_done": forged})
    assert "evil.example" not in await page(client, "/")
    client.session.cookie_jar.update_cookies({"relay_done": f"{'0' * 32}.{forged}"})
    assert "evil.example" not in await page(client, "/")


async def test_an_unknown_page_path_is_an_html_page_and_an_api_path_stays_json(
    client: Any,
) -> None:
    for signed_in in (False, True):
        if signed_in:
            await sign_in(client)
        response = await client.get("/no/such/page<b>", allow_redirects=False)
        html = await response.text()
        assert response.status == 404 and response.content_type == "text/html"
        assert "<h1>Not found</h1>" in html and "&lt;b&gt;" in html
        assert ('action="/logout"' in html) is signed_in  # the menu when signed in
    for path in ("/api/admin/nothing", "/api/client/nothing", "/internal-backstage/nothing"):
        response = await client.get(path)
        body = await response.json()
        assert response.status == 404 and body["name"] == "NotFoundError", path
    posted = await client.post("/no/such/page")
    assert posted.status in (404, 405) and (await posted.json())["id"]


async def test_revoking_the_key_of_this_session_is_warned_of_first(client: Any) -> None:
    keys = "/api/admin/api-tokens"
    mine = await (await client.post(keys, json={"type": "admin"}, headers=auth(ADMIN_KEY))).json()
    other = await (
        await client.post(
            keys, json={"type": "admin", "tokenName": "other"}, headers=auth(ADMIN_KEY)
        )
    ).json()
    await sign_in(client, mine["secret"])
    html = await page(client, "/keys")
    assert html.count("this session's key") == 1
    asked = await (
        await client.post(f"/keys/{mine['id']}/revoke", data={"csrf": csrf(html)})
    ).text()
    assert "This is the key you signed in with" in asked and 'role="alert"' in asked
    asked = await (
        await client.post(f"/keys/{other['id']}/revoke", data={"csrf": csrf(html)})
    ).text()
    assert "Revoke this key?" in asked and "This is the key you signed in with" not in asked
    revoked = await client.post(
        f"/keys/{mine['id']}/revoke",
        data={"csrf": csrf(html), "confirm": "yes"},
        allow_redirects=False,
    )
    assert revoked.status == 303 and revoked.headers["Location"] == "/login"
    assert (await client.get("/keys", allow_redirects=False)).status == 303  # signed out


async def test_the_new_pages_need_a_session(client: Any) -> None:
    for path in ("/segments", "/segments/new", "/projects", "/projects/default", "/environments",
                 "/archive"):  # fmt: skip
        response = await client.get(path, allow_redirects=False)
        assert response.status == 303 and response.headers["Location"].startswith("/login")
    for path in ("/segments", "/projects", "/environments", "/archive/x/revive"):
        response = await client.post(path, data={"csrf": "x"}, allow_redirects=False)
        assert response.status == 303 and response.headers["Location"].startswith("/login")
