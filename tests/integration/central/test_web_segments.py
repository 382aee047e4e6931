"""The segments page (issue 23): made, changed and deleted through forms whose constraint
editor checks values as the API does; in use, a segment cannot be deleted."""

from __future__ import annotations

from typing import Any

from conftest import ADMIN_KEY, auth
from webkit import FEATURES, csrf, page, sign_in


def row(n: int, context: str, operator: str, values: str, **extra: str) -> dict[str, str]:
    """A row of the constraint editor the segment and strategy forms share."""
    fields = {f"c{n}-context": context, f"c{n}-operator": operator, f"c{n}-values": values}
    return fields | {f"c{n}-{name}": value for name, value in extra.items()}


async def test_a_segment_is_made_changed_and_deleted_from_the_page(client: Any) -> None:
    await sign_in(client)
    token = csrf(await page(client, "/segments/new"))
    base = {"csrf": token, "name": "nordics"}
    wrong = await client.post(
        "/segments", data=base | row(0, "country", "IN", "NO\nSE") | row(1, "age", "NUM_GT", "old")
    )
    text = await wrong.text()
    assert wrong.status == 400 and "NUM_GT needs a decimal number, not &#39;old&#39;" in text
    assert 'value="nordics"' in text and ">NO\nSE</textarea>" in text  # kept as typed
    assert (await client.get("/api/admin/segments", headers=auth(ADMIN_KEY))).ok
    more = {"more": "constraint"}
    added = await client.post("/segments", data=base | row(0, "country", "IN", "NO") | more)
    assert added.status == 200 and 'name="c1-context"' in await added.text()  # nothing saved
    made = await client.post(
        "/segments",
        data=base
        | row(0, "country", "IN", "NO\nSE")
        | row(1, "age", "NUM_GT", "17", inverted="on"),
    )
    listed = await made.text()
    assert made.status == 200 and "Created the segment nordics" in listed
    assert "country in NO, SE" in listed and "not (age &gt; 17)" in listed
    segments = await (await client.get("/api/admin/segments", headers=auth(ADMIN_KEY))).json()
    [segment] = segments["segments"]
    assert segment["constraints"][1] == {
        "contextName": "age", "operator": "NUM_GT", "value": "17", "values": [],
        "inverted": True, "caseInsensitive": False,
    }  # fmt: skip
    edit = await page(client, f"/segments/{segment['id']}")
    assert ">NO\nSE</textarea>" in edit and 'name="c1-inverted" checked' in edit
    changed = await client.post(
        f"/segments/{segment['id']}",
        data={"csrf": token, "name": "nordics", "more": "constraint"}
        | row(0, "country", "IN", "NO\nSE\nDK")
        | row(1, "age", "NUM_GT", "17", remove="on"),
    )
    assert 'value="age"' not in await changed.text()
    saved = await client.post(
        f"/segments/{segment['id']}",
        data={"csrf": token, "name": "nordics"} | row(0, "country", "IN", "NO\nSE\nDK"),
    )
    assert "Saved the segment nordics" in await saved.text()
    again = await (await client.get("/api/admin/segments", headers=auth(ADMIN_KEY))).json()
    assert again["segments"][0]["constraints"][0]["values"] == ["NO", "SE", "DK"]

    # in use by a flag's strategy: no delete button, and a forged delete is refused
    await client.post(FEATURES, json={"name": "checkout"}, headers=auth(ADMIN_KEY))
    strategy = {"name": "default", "segments": [segment["id"]]}
    used = await client.post(
        f"{FEATURES}/checkout/environments/development/strategies", json=strategy,
        headers=auth(ADMIN_KEY),
    )  # fmt: skip
    assert used.status == 200, await used.text()
    listed = await page(client, "/segments")
    assert "Delete segment nordics" not in listed and "1 flag" in listed
    refused = await client.post(f"/segments/{segment['id']}/delete", data={"csrf": token})
    assert refused.status == 409 and "in use" in await refused.text()
    archived = await client.delete(f"{FEATURES}/checkout", headers=auth(ADMIN_KEY))
    assert archived.ok
    unused = {"name": "nobody", "constraints": []}
    made_unused = await client.post("/api/admin/segments", json=unused, headers=auth(ADMIN_KEY))
    unused_id = (await made_unused.json())["id"]
    assert "Delete segment nobody" in await page(client, "/segments")
    deleted = await client.post(f"/segments/{unused_id}/delete", data={"csrf": token})
    assert "Deleted the segment nobody" in await deleted.text()
    assert (await client.get(f"/segments/{unused_id}")).status == 404
