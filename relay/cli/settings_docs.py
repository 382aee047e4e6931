"""The documents generated from the settings model, so none of them is a hand copy.

``relay settings-docs`` writes them: the settings table of docs/settings.md, the example files
``config/<mode>.toml`` and the ``config`` section of the Helm chart's values schema, from
each field's description and ``Usage`` (relay/settings/). ``--check`` (and the tests)
report those that differ from what the model gives.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from relay.cli.edge.table import EDGE_DOCS, edge_table
from relay.cli.edge.table import TABLE_END as EDGE_END
from relay.cli.edge.table import TABLE_START as EDGE_START
from relay.cli.markdown import table
from relay.cli.proxy.table import PROXY_DOCS, proxy_table
from relay.cli.proxy.table import TABLE_END as PROXY_END
from relay.cli.proxy.table import TABLE_START as PROXY_START
from relay.settings import Settings
from relay.settings.usage import Mode, usage

SETTINGS_DOCS = Path("docs/settings.md")
VALUES_SCHEMA = Path("helm/relay/values.schema.json")
TABLE_START, TABLE_END = "<!-- settings-table -->\n", "\n<!-- /settings-table -->"
WIDTH = 100

# Settings the chart sets itself (helm/relay/templates/_helpers.tpl, "relay.env"): from its own
# values, the pod's name, the keys from a Secret; host keeps the 0.0.0.0 the probes need. Every
# other setting is a `config` value.
CHART_SETS = frozenset(
    {
        "mode",
        "host",
        "port",
        "data_dir",
        "upstream_url",
        "instance_id",
        "init_admin_api_tokens",
        "init_client_api_tokens",
        "upstream_tokens",
        "client_tokens",
    }
)
# What the chart narrows: a PostgreSQL URL holds a password, so it comes from the Secret.
CHART_RULES: dict[str, dict[str, Any]] = {
    "database_url": {
        "pattern": "^sqlite:///",
        "$comment": "Only SQLite here: a PostgreSQL URL holds a password, so it comes from the"
        " Secret (database.url or existingSecret's RELAY_DATABASE_URL)",
    },
}
# JSON schema keywords of the model carried over to the chart's schema, in this order.
BOUNDS = (
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "minLength",
    "maxLength",
    "pattern",
    "enum",
    "items",
)

SUMMARY = {
    Mode.CENTRAL: "relay in standalone mode: the central feature-flag service on embedded SQLite.",
    Mode.EDGE: "relay in relay mode: an edge sidecar buffering SDK metrics and flushing them"
    " upstream.",
    Mode.OFFLINE: "relay in offline mode: flags served from a file, no upstream (CI,"
    " development, air-gapped sites).",
}
GENERATED = "Generated from relay/settings/ by `relay settings-docs`"
HEADER = (
    "Every setting is shown, with its default where it has one. Precedence: defaults < this"
    " file (--config or RELAY_CONFIG) < RELAY_* environment variables < command-line flags."
    f" {GENERATED}: change the model, not this file."
)


def documents(root: Path) -> dict[Path, str]:
    """Each generated file, relative to ``root``, with the text the model gives it."""
    page = (root / SETTINGS_DOCS).read_text()
    start, end = page.find(TABLE_START), page.find(TABLE_END)
    if start < 0 or end < start:
        markers = f"{TABLE_START.strip()} ... {TABLE_END.strip()}"
        raise ValueError(f"{SETTINGS_DOCS}: no {markers} markers")
    schema = json.loads((root / VALUES_SCHEMA).read_text())
    schema["properties"]["config"] = chart_config()
    return {
        SETTINGS_DOCS: page[: start + len(TABLE_START)] + settings_table() + page[end:],
        **{Path("config") / f"{mode}.toml": config_file(mode) for mode in Mode},
        VALUES_SCHEMA: json.dumps(schema, indent=2) + "\n",
        Path(EDGE_DOCS): _between(root / EDGE_DOCS, EDGE_START, EDGE_END, edge_table()),
        Path(PROXY_DOCS): _between(root / PROXY_DOCS, PROXY_START, PROXY_END, proxy_table()),
    }


def _between(path: Path, start: str, end: str, table: str) -> str:
    """The page at ``path`` with ``table`` between its markers."""
    page = path.read_text()
    begin, finish = page.find(start), page.find(end)
    if begin < 0 or finish < begin:
        raise ValueError(f"{path.name}: no {start.strip()} ... {end} markers")
    return page[: begin + len(start)] + table + page[finish:]


def stale(root: Path) -> dict[Path, str]:
    """The generated files that are missing or differ from what the model gives, with that."""
    return {
        path: text
        for path, text in documents(root).items()
        if not (root / path).is_file() or (root / path).read_text() != text
    }


def run(root: Path, check: bool) -> int:
    """``relay settings-docs``: rewrite the stale files, or with ``check`` only list them."""
    try:
        wanted = stale(root)
        for path, text in wanted.items():
            if check:
                print(f"relay: stale: {path} (run `relay settings-docs`)", file=sys.stderr)
            else:
                (root / path).write_text(text)
                print(f"rewrote {path}")
    except (OSError, ValueError) as exc:
        print(f"relay: error: {exc}", file=sys.stderr)
        return 2
    return 1 if check and wanted else 0


# --- docs/settings.md ----------------------------------------------------------------------


def settings_table() -> str:
    """The table of docs/settings.md: one row per setting, its variable, flag, default, meaning."""
    rows = []
    for name, field in Settings.model_fields.items():
        default = field.get_default(call_default_factory=True)
        text = ",".join(default) if isinstance(default, list) else str(default or "")
        shown = f"`{text}`" if text else "-"
        flag = f"`--{name.replace('_', '-')}`"
        if field.annotation is bool:
            flag += f", `--no-{name.replace('_', '-')}`"
            shown = f"`{str(default).lower()}`"
        description = field.description or ""
        rows.append((f"`{name}`", f"`RELAY_{name.upper()}`", flag, shown, description))
    return table(("Setting", "Environment", "Flag", "Default", "Meaning"), rows)


# --- config/<mode>.toml -----------------------------------------------------------------


def config_file(mode: Mode) -> str:
    """An example file for ``mode``: settings of every mode, of this one, then the others'."""
    sections: dict[Mode | None, str] = {
        None: f"# {SUMMARY[mode]}\n{_comment(HEADER)}",
        mode: f"# --- {mode} mode ---",
        **{
            other: f"# --- {other} mode (ignored in {mode} mode) ---"
            for other in Mode
            if other is not mode
        },
    }
    shown: set[str] = set()
    blocks = []
    for section, heading in sections.items():
        blocks.append(heading)
        for name, field in Settings.model_fields.items():
            needs = usage(field)
            if name not in shown and (
                needs.mode is section or (section is mode and needs.applies(mode))
            ):
                shown.add(name)
                blocks.append(_setting(name, field, mode))
    return "\n\n".join(blocks) + "\n"


def _setting(name: str, field: FieldInfo, mode: Mode) -> str:
    """A setting's comment, then ``name = value``: its default, the file's mode, or an
    example, commented out unless the setting is required in this mode."""
    needs = usage(field)
    parts = [
        field.description,
        needs.note,
        f"Required in {needs.mode} mode" if needs.required else None,
    ]
    lines = [_comment(". ".join(p for p in parts if p))]
    if needs.secret:
        lines.append(
            _comment(f"Secret: prefer RELAY_{name.upper()} from a secret store to writing it here")
        )
    value = mode if name == "mode" else field.get_default(call_default_factory=True)
    if value is not None:
        lines.append(f"{name} = {toml_value(value)}")
    else:
        example = needs.example[mode] if isinstance(needs.example, dict) else needs.example
        if example is None:
            raise ValueError(f"{name}: no default, so its Usage needs an example to show")
        unset = "" if needs.required and needs.mode is mode else "# "
        lines.append(f"{unset}{name} = {toml_value(example)}")
    return "\n".join(lines)


def _comment(text: str) -> str:
    width = WIDTH - len("# ")
    lines = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    return "\n".join(f"# {line}" for line in lines)


def toml_value(value: object) -> str:
    """A default or example in TOML: the strings, numbers, booleans and arrays settings have.

    JSON's string escapes are all valid in a TOML basic string; enums and paths are strings.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and math.isfinite(value):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


# --- helm/relay/values.schema.json --------------------------------------------------------


def chart_config() -> dict[str, Any]:
    """The schema of the chart's ``config`` values: each setting it passes as RELAY_<NAME>."""
    model = Settings.model_json_schema()
    properties = {
        name: _chart_property(name, field, model)
        for name, field in Settings.model_fields.items()
        if name not in CHART_SETS
    }
    chart_sets = ", ".join(name for name in Settings.model_fields if name in CHART_SETS)
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
        "description": f"Settings passed as RELAY_<NAME>; set by the chart itself: {chart_sets}",
        "$comment": GENERATED,
    }


def _chart_property(name: str, field: FieldInfo, model: dict[str, Any]) -> dict[str, Any]:
    """One setting's schema: the model's type and bounds, "or null" when it is optional."""
    prop = model["properties"][name]
    [want] = [t for t in prop.get("anyOf", [prop]) if t.get("type") != "null"]
    if "$ref" in want:  # an enum
        want = model["$defs"][want["$ref"].split("/")[-1]]
    bounds = {key: want[key] for key in BOUNDS if key in want}
    if "items" in bounds:  # the chart joins a list with commas, and the relay drops empty items
        bounds["items"] = {**bounds["items"], "minLength": 1}
    return {
        "description": f"RELAY_{name.upper()}: {field.description}",
        "type": [want["type"], "null"] if "anyOf" in prop else want["type"],
        **bounds,
        **CHART_RULES.get(name, {}),
    }
