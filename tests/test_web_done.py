"""The confirmation line after each action on the web page (issue 23): what the form did
is said once, on the page it leads to, and a link cannot make the page claim it."""

from __future__ import annotations

from typing import Any

from conftest import ADMIN_KEY, auth
from test_web import FEATURES, csrf, page, sign_in


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
