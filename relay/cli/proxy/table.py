"""The table of docs/proxy.md ("Moving from the Unleash Proxy"): every variable of the
Proxy's, from the table ``relay proxy`` reads (``relay.cli.proxy.variables``), so that the
docs say what the code does. ``relay settings-docs`` writes it between the markers."""

from __future__ import annotations

from relay.cli.markdown import default, table
from relay.cli.proxy.variables import VARIABLES, Kind, ProxyVariable

PROXY_DOCS = "docs/proxy.md"
TABLE_START = "<!-- proxy-variables:start -->\n"
TABLE_END = "<!-- proxy-variables:end -->"

_CLIENT = "the environment of relay's upstream client"
_KIND = {
    Kind.HONOURED: "",
    Kind.SAID: "accepted, said at start",
    Kind.REFUSED: "**refused at start**",
}


def proxy_table() -> str:
    header = ("The Proxy's variable", "The Proxy's default", "relay", "Notes")
    return table(header, [_row(variable) for variable in VARIABLES]) + "\n"


def _row(variable: ProxyVariable) -> tuple[str, ...]:
    ours = ", ".join(f"`{name}`" for name in variable.ours) or _KIND[variable.kind] or _CLIENT
    if variable.kind is Kind.REFUSED and variable.default is not None:
        ours += f" (unless `{variable.default}`)"
    return (f"`{variable.name}`", default(variable.default), ours, variable.why)
