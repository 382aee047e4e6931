"""The flag forms of the web page over HTTP, on both backends: create a flag, its
strategies (each kind's form, constraints checked as the admin API checks them, segments,
variants), reorder, settings, archive; each change confirmed in a line on the next page,
each refused input shown on the form with a 4xx and nothing written."""

from __future__ import annotations

import html as markup
from typing import Any

from conftest import ADMIN_KEY, auth
from flagkit import add_strategy, create_flag, env_path, feature_path, ok, served, turn
from webkit import csrf, page, sign_in

STRATEGIES = "/flags/checkout/environments/development/strategies"


async def submit(client: Any, path: str, fields: dict[str, str], status: int = 303) -> Any:
    """Posts a form with the session's CSRF token; the answer (its text when not 303)."""
    token = csrf(await page(client, "/"))
    response = await client.post(path, data={"csrf": token, **fields}, allow_redirects=False)
    text = await response.text()
    assert response.status == status, (path, response.status, text[:2000])
    return response if status == 303 else markup.unescape(text)


async def strategies(client: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await ok(client, "GET", f"{env_path('checkout')}/strategies")
    return found


async def test_a_flag_is_created_and_the_next_page_says_so_once(client: Any) -> None:
    await sign_in(client)
    assert 'href="/new-flag"' in await page(client, "/")
    form = await page(client, "/new-flag")
    assert '<label for="name">' in form and '<label for="type">' in form
    fields = {"project": "default", "name": "checkout", "type": "experiment", "description": "x"}
    done = await submit(client, "/flags", fields)
    assert done.headers["Location"] == "/flags/checkout"
    shown = await page(client, "/flags/checkout")
    assert 'role="status">Created checkout in project default<' in shown
    assert "Created checkout" not in await page(client, "/flags/checkout")  # once
    flag = await ok(client, "GET", feature_path("checkout"))
    assert (flag["type"], flag["description"]) == ("experiment", "x")


async def test_a_refused_flag_is_shown_on_the_form_and_not_created(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "taken")
    for fields, status, why in (
        ({"project": "default", "name": "bad name", "type": "release"}, 400, "/name"),
        ({"project": "default", "name": "fine", "type": "nonsense"}, 400, "/type"),
        ({"project": "nowhere", "name": "fine", "type": "release"}, 404, "does not exist"),
        ({"project": "default", "name": "taken", "type": "release"}, 409, "already exists"),
    ):
        text = await submit(client, "/flags", fields, status)
        assert why in text and 'role="alert"' in text
        assert f'value="{fields["name"]}"' in text  # what was typed is kept
    flags = await ok(client, "GET", "/api/admin/projects/default/features")
    assert [f["name"] for f in flags["features"]] == ["taken"]


async def test_a_rollout_with_a_constraint_segment_and_variants_from_the_form(
    client: Any,
) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    segment = await ok(
        client,
        "POST",
        "/api/admin/segments",
        {"name": "beta", "constraints": []},
        status=201,
    )
    form = await page(client, f"{STRATEGIES}/new?kind=flexibleRollout")
    for label in ("rollout", "stickiness", "group", "c0-context", "c0-values", "v0-share"):
        assert f'<label for="{label}">' in form
    assert f'name="segment-{segment["id"]}"' in form
    fields = {
        "kind": "flexibleRollout",
        "rollout": "50",
        "stickiness": "userId",
        "group": "checkout",
        "title": "Half",
        "c0-context": "country",
        "c0-operator": "IN",
        "c0-values": "NO\nSE",
        f"segment-{segment['id']}": "on",
        "v0-name": "blue",
        "v1-name": "green",
        "v1-share": "30",
        "v1-payload-type": "json",
        "v1-payload": '{"a": 1}',
    }
    done = await submit(client, STRATEGIES, fields)
    assert done.headers["Location"] == "/flags/checkout#env-development"
    [saved] = await strategies(client)
    assert saved["parameters"] == {"rollout": "50", "stickiness": "userId", "groupId": "checkout"}
    assert saved["constraints"][0]["values"] == ["NO", "SE"]
    assert saved["segments"] == [segment["id"]] and saved["title"] == "Half"
    weights = {v["name"]: (v["weight"], v["weightType"]) for v in saved["variants"]}
    assert weights == {"blue": (700, "variable"), "green": (300, "fix")}
    shown = markup.unescape(await page(client, "/flags/checkout"))
    assert "Added the gradual rollout strategy of checkout in development" in shown
    assert "50 % of users by userId, country in NO, SE and in segment beta" in shown
    assert "Variants: blue 70 %, green 30 %" in shown
    # the edit form shows it back as it was saved, and saves it unchanged
    edit = markup.unescape(await page(client, f"{STRATEGIES}/{saved['id']}"))
    assert 'value="50"' in edit and "NO\nSE</textarea>" in edit and 'value="30"' in edit
    again = {**fields, "rollout": "60"}
    await submit(client, f"{STRATEGIES}/{saved['id']}", again)
    [changed] = await strategies(client)
    assert changed["id"] == saved["id"] and changed["parameters"]["rollout"] == "60"


async def test_refused_values_are_shown_on_the_form_and_nothing_is_saved(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    base = {"kind": "flexibleRollout", "rollout": "50", "stickiness": "default"}
    for extra, status, why in (
        (
            {"c0-context": "age", "c0-operator": "NUM_GT", "c0-values": "1_000"},
            400,
            "Constraint 1 value: NUM_GT needs a decimal number, not '1_000'",
        ),
        (
            {"c0-context": "at", "c0-operator": "DATE_AFTER", "c0-values": "2026-01-01"},
            400,
            "DATE_AFTER needs an RFC 3339 date-time",
        ),
        (
            {"c0-context": "v", "c0-operator": "SEMVER_GT", "c0-values": "v1.2"},
            400,
            "SEMVER_GT needs a SemVer version",
        ),
        (
            {"c0-context": "e", "c0-operator": "REGEX", "c0-values": "(", "c0-inverted": "on"},
            400,
            "REGEX",
        ),
        ({"c0-context": "country", "c0-operator": "IN", "c0-values": ""}, 400, ""),
        ({"c0-context": "", "c0-operator": "IN", "c0-values": "NO"}, 400, "Constraint 1"),
        ({"v0-name": "a", "v0-share": "150"}, 400, "Variant 1 share"),
        ({"v0-name": "a", "v0-share": "12.34"}, 400, "Variant 1 share"),
        ({"v0-name": "a", "v1-name": "a"}, 400, "Variant names must be unique"),
        ({"v0-name": "a", "v0-share": "100"}, 400, 'at least one "variable" variant'),
        ({"segment-99": "on"}, 400, "names segment 99, which does not exist"),
        ({"kind": "custom", "name": "mine", "parameters": "novalue"}, 400, "line 1"),
        ({"kind": "custom", "name": ""}, 400, "Name"),
    ):
        text = await submit(client, STRATEGIES, {**base, **extra}, status)
        assert 'role="alert"' in text and why in text, (extra, text[:3000])
    assert await strategies(client) == []
    # "add another" keeps what was typed and saves nothing
    more = {**base, "c0-context": "country", "c0-values": "NO", "more": "constraint"}
    text = await submit(client, STRATEGIES, more, 200)
    assert 'id="c0-context"' in text and 'value="country"' in text and 'id="c1-context"' in text
    assert await strategies(client) == []


async def test_strategies_are_moved_removed_and_sdks_follow(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    first = await add_strategy(
        client, "checkout", {"name": "userWithId", "parameters": {"userIds": "a"}}
    )
    second = await add_strategy(
        client, "checkout", {"name": "remoteAddress", "parameters": {"IPs": "10.0.0.1"}}
    )
    await turn(client, "checkout")
    shown = markup.unescape(await page(client, "/flags/checkout"))
    assert shown.index("users a") < shown.index("addresses 10.0.0.1")
    assert 'aria-label="Move strategy 2 (IP addresses) in development up"' in shown
    await submit(client, f"{STRATEGIES}/{second['id']}/move", {"direction": "up"})
    order = [s["name"] for s in (await served(client))["checkout"]["strategies"]]
    assert order == ["remoteAddress", "userWithId"]
    shown = markup.unescape(await page(client, "/flags/checkout"))
    assert "Moved the ip addresses strategy of checkout in development up, to place 1" in shown
    assert shown.index("users a") > shown.index("addresses 10.0.0.1")
    asked = await submit(client, f"{STRATEGIES}/{first['id']}/delete", {}, 200)
    assert "Remove this strategy of checkout in development?" in asked and "users a" in asked
    assert len(await strategies(client)) == 2  # only asked so far
    await submit(client, f"{STRATEGIES}/{first['id']}/delete", {"confirm": "yes"})
    assert [s["id"] for s in await strategies(client)] == [second["id"]]
    assert "Removed the user ids strategy" in await page(client, "/flags/checkout")


async def test_settings_and_archive_from_the_flag_page(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    fields = {"description": "New", "type": "kill-switch", "stale": "on"}
    await submit(client, "/flags/checkout/settings", fields)
    flag = await ok(client, "GET", feature_path("checkout"))
    assert (flag["description"], flag["type"], flag["stale"], flag["impressionData"]) == (
        "New",
        "kill-switch",
        True,
        False,
    )
    text = await submit(client, "/flags/checkout/settings", {"type": "nonsense"}, 400)
    assert "/type" in text
    assert (await ok(client, "GET", feature_path("checkout")))["type"] == "kill-switch"
    asked = await submit(client, "/flags/checkout/archive", {}, 200)
    assert "Archive checkout?" in asked
    assert not (await ok(client, "GET", feature_path("checkout")))["archived"]
    done = await submit(client, "/flags/checkout/archive", {"confirm": "yes"})
    assert done.headers["Location"] == "/"
    archived = await ok(client, "GET", "/api/admin/archive/features")
    assert [f["name"] for f in archived["features"]] == ["checkout"]
    assert "Archived checkout" in await page(client, "/")


async def test_turning_a_flag_off_says_so(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    await submit(client, "/flags/checkout/environments/production", {"on": "true", "next": "/"})
    assert "Turned on checkout in production" in await page(client, "/")
    response = await client.get(
        feature_path("checkout") + "/environments/production", headers=auth(ADMIN_KEY)
    )
    assert (await response.json())["enabled"] is True


async def test_each_kind_of_strategy_from_its_form(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    for kind, fields, name, parameters in (
        ("default", {}, "default", {}),
        ("userWithId", {"listed": "a, b\nc"}, "userWithId", {"userIds": "a,b,c"}),
        ("remoteAddress", {"listed": "10.0.0.1"}, "remoteAddress", {"IPs": "10.0.0.1"}),
        ("applicationHostname", {"listed": "web-1"}, "applicationHostname", {"hostNames": "web-1"}),
        (
            "custom",
            {"name": "mine", "parameters": "a=1\n\nb = two"},
            "mine",
            {"a": "1", "b": "two"},
        ),
    ):
        form = await page(client, f"{STRATEGIES}/new?kind={kind}")
        assert f'name="kind" value="{kind}"' in form
        await submit(client, STRATEGIES, {"kind": kind, "title": kind, "disabled": "on", **fields})
        saved = next(s for s in await strategies(client) if s["title"] == kind)
        assert (saved["name"], saved["parameters"], saved["disabled"]) == (name, parameters, True)
    shown = markup.unescape(await page(client, "/flags/checkout"))
    for words in (
        "everyone",
        "users a, b, c",
        "addresses 10.0.0.1",
        "hosts web-1",
        "custom strategy mine with a=1, b=two",
    ):
        assert f'<p class="words">{words}</p>' in shown, words
    assert shown.count(">disabled</span>") == 5


async def test_parameters_the_form_has_no_field_for_are_kept(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    body = {"name": "userWithId", "parameters": {"userIds": "a", "extra": "x"}}
    saved = await add_strategy(client, "checkout", body)
    edit = markup.unescape(await page(client, f"{STRATEGIES}/{saved['id']}"))
    assert "extra=x</textarea>" in edit
    fields = {"kind": "userWithId", "listed": "a, b", "parameters": "extra=x"}
    await submit(client, f"{STRATEGIES}/{saved['id']}", fields)
    [changed] = await strategies(client)
    assert changed["parameters"] == {"userIds": "a,b", "extra": "x"}


async def test_revoking_a_key_says_so(client: Any) -> None:
    await sign_in(client)
    made = await ok(
        client,
        "POST",
        "/api/admin/api-tokens",
        {"type": "admin", "tokenName": "old-one"},
        status=201,
    )
    await submit(client, f"/keys/{made['id']}/revoke", {"confirm": "yes"})
    assert "Revoked the key old-one" in await page(client, "/keys")


async def test_hostile_forms_get_a_4xx_page_and_write_nothing(client: Any) -> None:
    await sign_in(client)
    await create_flag(client, "checkout")
    base = {"kind": "flexibleRollout", "rollout": "50", "stickiness": "default"}
    for extra in (
        {"c0-context": "x", "c0-operator": "BOGUS", "c0-values": "1"},
        {"v0-name": "a", "v0-share": "NaN"},
        {"v0-name": "a", "v0-share": "sNaN"},
        {"v0-name": "a", "v0-share": "1e999999"},
        {"segment-99999999999999999999": "on"},
        {"segment-0": "on"},
        {"segment-99999999999": "on"},
        {"segment-" + "9" * 5000: "on", "c0-context": "", "c0-values": "x"},
        {"segment-²": "on", "c0-context": "", "c0-values": "x"},
        {"kind": "custom", "name": "x" * 5000},
        {"kind": "custom", "name": "x", "parameters": "\n".join(f"p{i}=1" for i in range(101))},
        {"c100-context": "x", **{f"c{i}-context": "x" for i in range(100)}},
    ):
        text = await submit(client, STRATEGIES, {**base, **extra}, 400)
        assert 'role="alert"' in text, extra
    token = csrf(await page(client, "/"))
    many = {"csrf": token, **{f"f{i}": "x" for i in range(2000)}}
    response = await client.post(STRATEGIES, data=many)
    assert response.status == 400 and "cannot be read" in await response.text()
    raw = await client.post(
        STRATEGIES,
        data=b"csrf=" + token.encode() + b"&kind=\xff",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert raw.status == 400
    assert await strategies(client) == []
