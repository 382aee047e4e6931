"""The table of docs/proxy.md ("Moving from the Unleash Proxy"): every variable of the
Proxy's, from the table ``relay proxy`` reads (``relay.cli.proxy.variables``), so that the
docs say what the code does. ``relay settings-docs`` writes it between the markers."""

from __future__ import annotations

from relay.cli.proxy.variables import VARIABLES, Kind, ProxyVariable

PROXY_DOCS = "docs/proxy.md"
TABLE_START = "<!-- proxy-variables:start -->\n"
TABLE_END = "<!-- proxy-variables:end -->"

EMPTY = '""'
_CLIENT = "the environment of relay's upstream client"
_KIND = {
    Kind.HONOURED: "",
    Kind.SAID: "accepted, said at start",
    Kind.REFUSED: "**refused at start**",
}


def proxy_table() -> str:
    rows = [
        "| The Proxy's variable | The Proxy's default | relay | Notes |",
        "|---|---|---|---|",
    ]
    rows += [_row(variable) for variable in VARIABLES]
    return "\n".join(rows) + "\n"


def _row(variable: ProxyVariable) -> str:
    default = "" if variable.default is None else f"`{variable.default or EMPTY}`"
    ours = ", ".join(f"`{name}`" for name in variable.ours) or _KIND[variable.kind] or _CLIENT
    if variable.kind is Kind.REFUSED and variable.default is not None:
        ours += f" (unless `{variable.default}`)"
    notes = variable.why.replace("|", "\\|")
    return f"| `{variable.name}` | {default} | {ours} | {notes} |"
