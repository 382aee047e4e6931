"""The web page's playground over HTTP, on both backends: an environment and a context
chosen, every flag's result, variant and reason; paging; mistakes in the form shown as a
readable 400, never a 500. The browser test (``test_web_browser.py``) fills the form."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import urlencode

from flagkit import add_strategy, create_flag, rollout, turn
from webkit import page, sign_in


async def build(client: Any) -> None:
    """In development: a flag for user 7 with a variant and its payload, one for the plan
    property, one for an address range, one off; all off in production."""
    for name in ("checkout", "by-plan", "office", "dormant"):
        await create_flag(client, name)
    users = {"contextName": "userId", "operator": "IN", "values": ["7"]}
    checkout = rollout(100, stickiness="userId", groupId="checkout")
    checkout["constraints"] = [users]
    checkout["variants"] = [
        {
            "name": "blue",
            "weight": 1000,
            "weightType": "variable",
            "stickiness": "userId",
            "payload": {"type": "json", "value": '{"colour": "#00f"}'},
        }
    ]
    await add_strategy(client, "checkout", checkout)
    plan = {"contextName": "plan", "operator": "IN", "values": ["pro"]}
    await add_strategy(client, "by-plan", {"name": "default", "constraints": [plan]})
    office = {"name": "remoteAddress", "parameters": {"IPs": "10.0.0.0/8"}}
    await add_strategy(client, "office", office)
    for name in ("checkout", "by-plan", "office"):
        await turn(client, name)


def results(text: str) -> dict[str, tuple[str, str, str]]:
    """Each flag's row: (result, variant, why), as text."""
    rows = re.findall(r"<tr>\s*<th scope=\"row\"[^>]*>(.*?)</tr>", text, re.S)
    found = {}
    for row in rows:
        cells = [html.unescape(re.sub(r"<[^>]+>", " ", c)) for c in re.split(r"</t[hd]>", row)]
        name, _, result, variant, why = (" ".join(c.split()) for c in cells[:5])
        found[name] = (result, variant, why)
    return found


async def playground(client: Any, status: int = 200, **query: str) -> str:
    return await page(client, f"/playground?{urlencode(query)}", status)


async def test_the_playground_needs_a_session_and_is_in_the_navigation(client: Any) -> None:
    response = await client.get("/playground", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"].startswith("/login?next=")
    await sign_in(client)
    assert 'href="/playground"' in await page(client, "/")
    form = await page(client, "/playground")
    assert '<form method="get" action="/playground"' in form
    assert "<option selected>development</option>" in form and "<table" not in form


async def test_results_variants_and_reasons_for_contexts(client: Any) -> None:
    await build(client)
    await sign_in(client)
    seven = results(
        await playground(
            client,
            environment="development",
            userId="7",
            remoteAddress="10.1.2.3",
            properties="plan=pro\r\n\r\nteam = a=b",
        )
    )
    assert seven == {
        "by-plan": ("on", "disabled", "strategy 1 default matched"),
        "checkout": ("on", 'blue json {"colour": "#00f"}', "strategy 1 flexibleRollout matched"),
        "dormant": ("off", "disabled", "disabled in this environment"),
        "office": ("on", "disabled", "strategy 1 remoteAddress matched"),
    }
    other = results(
        await playground(
            client, environment="development", userId="8", appName="shop", properties="plan=free"
        )
    )
    assert other["checkout"] == (
        "off",
        "disabled",
        "constraint 1 on userId (IN) failed in strategy 1 flexibleRollout",
    )
    assert other["by-plan"][2] == "constraint 1 on plan (IN) failed in strategy 1 default"
    assert other["office"][0] == "off"  # no address given: none is made up
    production = results(await playground(client, environment="production", userId="7"))
    assert {r[2] for r in production.values()} == {"disabled in this environment"}
    # a context that the strategies cannot read is still evaluated
    odd = results(await playground(client, environment="development", remoteAddress="not-an-ip"))
    assert odd["office"][0] == "off"


async def test_the_page_is_bounded_and_filtered(client: Any) -> None:
    await build(client)
    await sign_in(client)
    first = await playground(client, environment="development", userId="7", limit="3")
    assert list(results(first)) == ["by-plan", "checkout", "dormant"]
    following = html.unescape(re.search(r'<a href="([^"]+)" rel="next">', first).group(1))
    second = await page(client, following)
    assert list(results(second)) == ["office"] and 'rel="next"' not in second
    assert results(second)["office"][0] == "off"  # the context goes on to the next page
    found = await playground(client, environment="development", q="CHECK")
    assert list(results(found)) == ["checkout"]
    none = await playground(client, environment="development", q="nothing")
    assert "No flag matches" in none


async def test_mistakes_in_the_form_are_readable_never_a_500(client: Any) -> None:
    await build(client)
    await sign_in(client)
    long = "x" * 5000
    many = "\n".join(f"p{i}=1" for i in range(101))
    for query, message in [
        ({"properties": "plan"}, "Context entry 1 is not key=value"),
        ({"properties": "=pro"}, "A context key must not be empty"),
        ({"properties": "plan=a\nplan=b"}, "The context key plan is given twice"),
        ({"properties": "userId=9", "userId": "7"}, "The context key userId is given twice"),
        ({"properties": "environment=production"}, "The environment is chosen apart"),
        ({"userId": long}, "userId is invalid: String should have at most 4096 characters"),
        ({"properties": f"plan={long}"}, "property plan is invalid"),
        ({"properties": many}, "at most 100 items"),
        ({"environment": "nowhere"}, "Could not find environment nowhere"),
        ({"limit": "0"}, "limit must be a whole number from 1 to 1000"),
        ({"after": "!!"}, "after must be the cursor of a page's next URL"),
    ]:
        text = await playground(client, 400, **{"environment": "development", **query})
        assert message in html.unescape(text), (query, text[-2000:])
        assert "<table" not in text
    kept = await playground(client, 400, environment="development", userId="7", properties="x")
    assert 'value="7"' in kept  # the form keeps what was given, to be corrected
