"""The table of docs/edge.md ("Moving from Unleash Edge"): every option of Edge's, from the
table the parser reads (``relay.cli.edge.options``), so the docs say what the code does.
``relay settings-docs`` writes it between the markers; ``--check`` fails when it is stale."""

from __future__ import annotations

from relay.cli.edge.options import GLOBAL, OPTIONS, TOP, EdgeOption, Kind, Takes

EDGE_DOCS = "docs/edge.md"
TABLE_START = "<!-- edge-options:start -->\n"
TABLE_END = "<!-- edge-options:end -->"

EMPTY = '""'
_WHERE = {TOP: "before the subcommand", GLOBAL: "anywhere"}
_KIND = {
    Kind.SETTING: "",
    Kind.CHECK: "option of `relay health` / `relay ready`",
    Kind.NO_EFFECT: "accepted, no effect (a warning at start)",
    Kind.UNSUPPORTED: "**not supported**",
    Kind.NOT_READ: "not read",
}


def edge_table() -> str:
    rows = [
        "| Edge option | Environment | Where | Edge's default | relay | Notes |",
        "|---|---|---|---|---|---|",
    ]
    rows += [_row(option) for option in OPTIONS]
    return "\n".join(rows) + "\n"


def _row(option: EdgeOption) -> str:
    flag = f"`{option.flag}`" + (f" `-{option.short}`" if option.short else "")
    if option.flagless:
        flag = "(environment only)"
    where = (
        _WHERE[option.where]
        if isinstance(option.where, str)
        else " ".join(f"`{w}`" for w in option.where)
    )
    default = "" if option.default is None else f"`{option.default or EMPTY}`"
    if option.takes is Takes.FLAG:
        default = "`false`"
    ours = ", ".join(f"`{name}`" for name in option.ours) or _KIND[option.kind]
    notes = option.why.replace("|", "\\|")
    return f"| {flag} | `{option.variable}` | {where} | {default} | {ours} | {notes} |"
