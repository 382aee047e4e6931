"""The projects and environments pages (issue 23): a project and an environment made, the
environment enabled in the project, its default strategy set, then removed after a
confirmation; mistakes shown on the form with the API's own checks."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from conftest import ADMIN_KEY, auth
from webkit import csrf, page, sign_in


async def api(client: Any, path: str) -> Any:
    return await (await client.get(path, headers=auth(ADMIN_KEY))).json()


async def test_projects_and_environments_are_managed_from_the_page(client: Any) -> None:
    await sign_in(client)
    token = csrf(await page(client, "/projects"))
    bad = await client.post("/projects", data={"csrf": token, "id": "no spaces", "name": "X"})
    assert bad.status == 400 and "id: String should match pattern" in await bad.text()
    made = await client.post(
        "/projects", data={"csrf": token, "id": "shop", "name": "Shop", "description": "web"}
    )
    listed = await made.text()
    assert "Created the project Shop (shop)" in listed and 'href="/projects/shop"' in listed
    taken = await client.post("/projects", data={"csrf": token, "id": "shop", "name": "Again"})
    assert taken.status == 409 and "already exists" in await taken.text()

    env = await client.post(
        "/environments", data={"csrf": token, "name": "staging", "type": "test", "sortOrder": "x"}
    )
    assert env.status == 400 and "sort order is a whole number" in await env.text()
    env = await client.post(
        "/environments", data={"csrf": token, "name": "staging", "type": "test"}
    )
    assert "Created the environment staging" in await env.text()

    shop = await page(client, "/projects/shop")
    assert "None: this project" in shop and "<option>staging</option>" in shop
    added = await client.post(
        "/projects/shop/environments", data={"csrf": token, "environment": "staging"}
    )
    assert "Enabled staging in shop" in await added.text()
    assert [
        e["environment"] for e in (await api(client, "/api/admin/projects/shop"))["environments"]
    ] == ["staging"]

    action = "/projects/shop/environments/staging/default-strategy"
    wrong = await client.post(action, data={"csrf": token, "rollout": "150"})
    assert wrong.status == 400 and "0 to 100" in await wrong.text()
    saved = await client.post(
        action, data={"csrf": token, "rollout": "25", "stickiness": "userId", "groupId": "g"}
    )
    text = await saved.text()
    assert "now get 25 % by default" in text and "<strong>25 %</strong> of users by userId" in text
    [environment] = (await api(client, "/api/admin/projects/shop"))["environments"]
    assert environment["defaultStrategy"]["parameters"] == {
        "rollout": "25",
        "stickiness": "userId",
        "groupId": "g",
    }

    remove = "/projects/shop/environments/staging/remove"
    asked = await client.post(remove, data={"csrf": token})
    assert "Remove staging from Shop?" in await asked.text()
    assert (await api(client, "/api/admin/projects/shop"))["environments"]  # only asked
    removed = await client.post(remove, data={"csrf": token, "confirm": "yes"})
    assert "Removed staging from shop" in await removed.text()
    assert (await api(client, "/api/admin/projects/shop"))["environments"] == []
    assert (await client.get("/projects/nothing")).status == 404


async def test_archived_flags_are_listed_and_revived_from_the_page(client: Any) -> None:
    features = "/api/admin/projects/default/features"
    for name in ("old-checkout", "kept"):
        assert (await client.post(features, json={"name": name}, headers=auth(ADMIN_KEY))).ok
    on = f"{features}/old-checkout/environments/development/on"
    assert (await client.post(on, headers=auth(ADMIN_KEY))).ok
    assert (await client.delete(f"{features}/old-checkout", headers=auth(ADMIN_KEY))).ok
    await sign_in(client)
    archive = await page(client, "/archive")
    assert "old-checkout" in archive and "kept" not in archive
    assert "old-checkout" not in await page(client, "/")
    revived = await client.post("/archive/old-checkout/revive", data={"csrf": csrf(archive)})
    text = await revived.text()
    assert "Revived old-checkout: it is off in every environment" in text
    assert "No archived flags." in text
    flag = await api(client, f"{features}/old-checkout")
    assert flag["archived"] is False
    assert not any(e["enabled"] for e in flag["environments"])
    missing = await client.post("/archive/nothing/revive", data={"csrf": csrf(archive)})
    assert missing.status == 404 and "does not exist" in await missing.text()


async def test_hostile_form_input_is_refused_not_a_500(client: Any) -> None:
    await sign_in(client)
    token = csrf(await page(client, "/projects"))
    nul = "a\x00b"
    posts = [
        ("/projects", {"id": "x", "name": nul, "description": nul}),
        ("/environments", {"name": "e", "type": nul, "sortOrder": "9" * 40}),
        ("/projects/default/environments", {"environment": nul}),
        (f"/projects/{quote(nul)}/environments/development/remove", {"confirm": "yes"}),
        ("/projects/default/environments/%00/default-strategy", {"rollout": "5"}),
        ("/projects/default/environments/development/default-strategy", {"rollout": "9" * 40}),
        ("/segments", {"name": nul, "rows": "1", "context.0": nul, "values.0": nul}),
        ("/segments", {"name": "s", "rows": "9999", "add": "1"}),
        ("/segments/99999999999999999999", {"name": "s"}),
        ("/segments/1/delete", {}),
        (f"/archive/{quote(nul)}/revive", {}),
    ]
    for path, data in posts:
        response = await client.post(path, data={"csrf": token, **data})
        assert response.status < 500, (path, response.status, await response.text())
        assert response.content_type == "text/html", path
    for path in (
        "/projects/%00",
        "/segments/0",
        "/archive?offset=x",
        "/archive?limit=-1",
        "/?q=%00",
    ):
        response = await client.get(path)
        assert response.status < 500, (path, response.status)


async def test_projects_environments_and_archived_flags_are_renamed_changed_deleted(
    client: Any,
) -> None:
    """Each deletion asks first (the box unticked: 400, nothing deleted) and Unleash's
    refusals are shown on the page, in its words."""
    await sign_in(client)
    token = csrf(await page(client, "/projects"))
    await client.post("/projects", data={"csrf": token, "id": "shop", "name": "Shop"})
    renamed = await client.post(
        "/projects/shop/rename", data={"csrf": token, "name": "The shop", "description": "web"}
    )
    assert "Saved the project shop: The shop" in await renamed.text()
    assert (await api(client, "/api/admin/projects/shop"))["name"] == "The shop"
    refused = await client.post("/projects/default/delete", data={"csrf": token, "confirm": "yes"})
    assert refused.status == 403 and "You can not delete the default project!" in (
        await refused.text()
    )
    await client.post(
        "/api/admin/projects/shop/features", json={"name": "cart"}, headers=auth(ADMIN_KEY)
    )
    busy = await client.post("/projects/shop/delete", data={"csrf": token, "confirm": "yes"})
    assert busy.status == 403 and "with active feature flags" in await busy.text()

    # the archive: deleted for good, once asked
    archived = await client.post("/flags/cart/archive", data={"csrf": token, "confirm": "yes"})
    assert archived.ok
    listed = await page(client, "/archive")
    assert (
        'action="/archive/cart/delete"' in listed
        and 'name="confirm" value="yes" required' in listed
    )
    unasked = await client.post("/archive/cart/delete", data={"csrf": token})
    assert unasked.status == 400 and "Tick the box" in await unasked.text()
    gone = await client.post("/archive/cart/delete", data={"csrf": token, "confirm": "yes"})
    assert "Deleted cart for good" in await gone.text()
    assert "cart" not in await page(client, "/archive")
    deleted = await client.post("/projects/shop/delete", data={"csrf": token, "confirm": "yes"})
    assert "Deleted the project shop" in await deleted.text()
    assert (await client.get("/api/admin/projects/shop", headers=auth(ADMIN_KEY))).status == 404

    # environments: type and order changed; one with keys bound to it is not deleted
    changed = await client.post(
        "/environments/development", data={"csrf": token, "type": "test", "sortOrder": "7"}
    )
    assert "Saved development: type test, sort order 7" in await changed.text()
    wrong = await client.post("/environments/development", data={"csrf": token, "sortOrder": "x"})
    assert wrong.status == 400 and "whole number" in await wrong.text()
    await client.post("/environments", data={"csrf": token, "name": "staging", "type": "test"})
    unasked = await client.post("/environments/staging/delete", data={"csrf": token})
    assert unasked.status == 400
    removed = await client.post(
        "/environments/staging/delete", data={"csrf": token, "confirm": "yes"}
    )
    assert "Deleted the environment staging" in await removed.text()
    keyed = await client.post(
        "/environments/development/delete", data={"csrf": token, "confirm": "yes"}
    )
    assert keyed.status == 409 and "revoke them first" in await keyed.text()
    environments = await api(client, "/api/admin/environments")
    assert [e["name"] for e in environments["environments"]].count("staging") == 0


async def test_a_rollout_of_other_digits_is_refused_not_a_500(client: Any) -> None:
    """``str.isdigit`` takes ``²`` and a string of thousands of digits, which ``int``
    refuses with a ValueError: the default strategy's form was a 500 for them."""
    await sign_in(client)
    token = csrf(await page(client, "/projects"))
    action = "/projects/default/environments/development/default-strategy"
    for rollout in ("²", "9" * 5000, "٣"):
        response = await client.post(action, data={"csrf": token, "rollout": rollout})
        assert response.status == 400, (rollout[:5], response.status)
        assert "whole percentage from 0 to 100" in await response.text()
