"""A flag's dependency and environment variants on its page, and the event log page (issue
23): each change made through a form is what the admin API and the client API then show,
refusals are Unleash's, and every change is on the event log page filtered by the flag."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from conftest import ADMIN_KEY, DEV_KEY, auth
from webkit import FEATURES, csrf, page, sign_in

from relay.central.web.events import _changes, ago


async def _flag(client: Any, name: str) -> None:
    made = await client.post(FEATURES, json={"name": name}, headers=auth(ADMIN_KEY))
    assert made.status in (200, 201), await made.text()


async def _client_flag(client: Any, name: str) -> dict[str, Any]:
    answer = await (await client.get("/api/client/features", headers=auth(DEV_KEY))).json()
    [found] = [f for f in answer["features"] if f["name"] == name]
    return dict(found)


async def test_a_dependency_is_set_shown_in_words_refused_as_unleash_and_removed(
    client: Any,
) -> None:
    for name in ("parent", "child", "other"):
        await _flag(client, name)
    await sign_in(client)
    shown = await page(client, "/flags/child")
    token = csrf(shown)
    assert "<option>parent</option>" in shown and "<option>other</option>" in shown
    made = await client.post(
        "/flags/child/dependencies",
        data={"csrf": token, "parent": "parent", "enabled": "true", "variants": "blue, green"},
    )
    text = await made.text()
    assert made.status == 200
    assert "child is now served only while parent is on, with variant blue or green" in text
    assert "Served only while parent is on, with variant blue or green." in text
    served = await _client_flag(client, "child")
    expected = {"feature": "parent", "enabled": True, "variants": ["blue", "green"]}
    assert served["dependencies"] == [expected]

    # the parent now has a child: it may not depend on another flag, nor be archived
    parent = await page(client, "/flags/parent")
    assert "Flags that depend on it: child." in parent and 'name="parent"' not in parent
    refused = await client.post(
        "/flags/parent/dependencies", data={"csrf": token, "parent": "other"}
    )
    assert refused.status == 403 and "Transitive dependency detected" in await refused.text()

    off = await client.post(
        "/flags/child/dependencies",
        data={"csrf": token, "parent": "parent", "enabled": "false", "variants": "blue"},
    )
    assert "child is now served only while parent is off" in await off.text()
    assert (await _client_flag(client, "child"))["dependencies"] == [
        {"feature": "parent", "enabled": False}
    ]
    removed = await client.post("/flags/child/dependencies/delete", data={"csrf": token})
    assert "child no longer depends on another flag" in await removed.text()
    assert "dependencies" not in await _client_flag(client, "child")


async def test_environment_variants_are_set_in_the_environments_ticked(client: Any) -> None:
    await _flag(client, "colours")
    await sign_in(client)
    form = await page(client, "/flags/colours/environments/development/variants")
    token = csrf(form)
    assert 'name="env-development" checked' in form
    fields = {"csrf": token, "stickiness": "userId", "env-development": "on"}
    rows = {"v0-name": "blue", "v0-share": "20", "v1-name": "green", "v1-share": ""}
    wrong = await client.post(
        "/flags/colours/environments/development/variants",
        data=fields | rows | {"v1-share": "101"},
    )
    assert wrong.status == 400 and "Variant 2 share" in await wrong.text()
    saved = await client.post(
        "/flags/colours/environments/development/variants", data=fields | rows
    )
    text = await saved.text()
    assert "Set 2 environment variants of colours in development" in text
    assert "blue 20 %, green 80 %" in text
    served = (await _client_flag(client, "colours"))["variants"]
    assert [(v["name"], v["weight"], v["weightType"], v["stickiness"]) for v in served] == [
        ("blue", 200, "fix", "userId"),
        ("green", 800, "variable", "userId"),
    ]
    again = await page(client, "/flags/colours/environments/development/variants")
    assert 'value="blue"' in again and 'value="20"' in again and 'value="userId"' in again
    none = await client.post(
        "/flags/colours/environments/development/variants",
        data={"csrf": token} | rows,
    )
    assert none.status == 400 and "No environments provided" in await none.text()


async def test_the_event_log_page_shows_each_change_of_a_flag_in_words(client: Any) -> None:
    for name in ("parent", "child"):
        await _flag(client, name)
    await sign_in(client)
    token = csrf(await page(client, "/flags/child"))
    await client.post("/flags/child/environments/development", data={"csrf": token, "on": "true"})
    await client.post("/flags/child/dependencies", data={"csrf": token, "parent": "parent"})
    flag_page = await page(client, "/flags/child")
    assert 'href="/events?feature=child"' in flag_page
    log = await page(client, "/events?feature=child")
    assert "3 events" not in log and 'Changes of <a href="/flags/child">child</a>: 3.' in log
    assert "turned on child in development" in log
    assert "made child depend on another flag" in log
    assert "created child" in log and "created parent" not in log
    assert "just now" in log and "UTC</time>" in log
    # before and after: the dependency's fields, and the whole of each side
    assert '<code>feature</code>: <span class="visually-hidden">before </span>' in log
    assert "&#34;parent&#34;" in log and "Before and after in full" in log
    by_project = await page(client, "/events?project=default")
    assert "created parent" in by_project and "made child depend" in by_project
    await client.post("/projects", data={"csrf": token, "id": "shop", "name": "Shop"})
    elsewhere = await page(client, "/events?project=shop")
    assert "created the project shop" in elsewhere and "created child" not in elsewhere
    everything = await page(client, "/events")
    assert "created parent" in everything and 'href="/events"' in everything  # in the menu
    paged = await page(client, "/events?feature=child&limit=1")
    assert 'href="/events?feature=child&amp;offset=1&amp;limit=1"' in paged
    for wrong in ("/events?offset=-1", "/events?limit=x", "/events?feature=%00"):
        response = await client.get(wrong)
        assert response.status == 400 and response.content_type == "text/html", wrong


def test_times_are_said_relative_to_now() -> None:
    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert ago(now - timedelta(seconds=30), now) == "just now"
    assert ago(now - timedelta(minutes=1), now) == "1 minute ago"
    assert ago(now - timedelta(hours=5, minutes=3), now) == "5 hours ago"
    assert ago(now - timedelta(days=3), now) == "3 days ago"


def test_a_change_is_shown_at_the_paths_it_touched() -> None:
    before = {
        "name": "checkout",
        "environments": [
            {"name": "development", "enabled": False, "strategies": []},
            {"name": "production", "enabled": False, "strategies": []},
        ],
    }
    after = {
        "name": "checkout",
        "environments": [
            {"name": "development", "enabled": True, "strategies": [{"id": "s1", "name": "x"}]},
            {"name": "production", "enabled": False, "strategies": []},
        ],
    }
    assert _changes(before, after) == [
        ("environments[development].enabled", "false", "true"),
        ("environments[development].strategies[s1]", "none", '{"id": "s1", "name": "x"}'),
    ]
    assert _changes(None, {"feature": "parent"}) == [("feature", "none", '"parent"')]
    assert _changes([1], [2]) == [("", "[1]", "[2]")]


async def test_tags_are_added_and_removed_on_the_flag_page(client: Any) -> None:
    await _flag(client, "tagged")
    await sign_in(client)
    token = csrf(await page(client, "/flags/tagged"))
    short = await client.post("/flags/tagged/tags", data={"csrf": token, "value": "x"})
    assert short.status == 400  # the API's model: two characters at least
    added = await client.post("/flags/tagged/tags", data={"csrf": token, "value": "team-a"})
    text = await added.text()
    assert "Tagged tagged simple:team-a" in text and "simple:team-a</span>" in text
    tags = await client.get("/api/admin/features/tagged/tags", headers=auth(ADMIN_KEY))
    assert (await tags.json())["tags"] == [{"type": "simple", "value": "team-a"}]
    removed = await client.post(
        "/flags/tagged/tags/delete", data={"csrf": token, "type": "simple", "value": "team-a"}
    )
    assert "Removed the tag simple:team-a of tagged" in await removed.text()
    assert "No tags." in await page(client, "/flags/tagged")
