"""The table of docs/edge.md ("Moving from Unleash Edge"): every option of Edge's, from the
table the parser reads (``relay.cli.edge.options``), so the docs say what the code does.
``relay settings-docs`` writes it between the markers; ``--check`` fails when it is stale."""

from __future__ import annotations

from relay.cli.edge.options import GLOBAL, OPTIONS, TOP, EdgeOption, Kind, Takes
from relay.cli.markdown import default, table

EDGE_DOCS = "docs/edge.md"
TABLE_START = "<!-- edge-options:start -->\n"
TABLE_END = "<!-- edge-options:end -->"

_WHERE = {TOP: "before the subcommand", GLOBAL: "anywhere"}
_KIND = {
    Kind.SETTING: "",
    Kind.CHECK: "option of `relay health` / `relay ready`",
    Kind.NO_EFFECT: "accepted, no effect (a warning at start)",
    Kind.UNSUPPORTED: "**not supported**",
    Kind.NOT_READ: "not read",
}


def edge_table() -> str:
    header = ("Edge option", "Environment", "Where", "Edge's default", "relay", "Notes")
    return table(header, [_row(option) for option in OPTIONS]) + "\n"


def _row(option: EdgeOption) -> tuple[str, ...]:
    flag = f"`{option.flag}`" + (f" `-{option.short}`" if option.short else "")
    if option.flagless:
        flag = "(environment only)"
    where = (
        _WHERE[option.where]
        if isinstance(option.where, str)
        else " ".join(f"`{w}`" for w in option.where)
    )
    shown = "`false`" if option.takes is Takes.FLAG else default(option.default)
    ours = ", ".join(f"`{name}`" for name in option.ours) or _KIND[option.kind]
    return (flag, f"`{option.variable}`", where, shown, ours, option.why)
