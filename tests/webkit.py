"""The web page over HTTP as a person uses it: sign-in, a page read, its CSRF token."""

from __future__ import annotations

import re
from typing import Any

from conftest import ADMIN_KEY

FEATURES = "/api/admin/projects/default/features"


async def sign_in(client: Any, key: str = ADMIN_KEY, next_: str = "/") -> Any:
    return await client.post("/login", data={"key": key, "next": next_}, allow_redirects=False)


async def page(client: Any, path: str, status: int = 200) -> str:
    response = await client.get(path, allow_redirects=False)
    text: str = await response.text()
    assert response.status == status, (path, response.status, text[:500])
    return text


def csrf(html: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, html[:500]
    return found.group(1)
