"""The documents generated from the settings model are what the model gives, and
``relay settings-docs --check`` notices when one is not."""

from __future__ import annotations

import math
import shutil
import tomllib
from pathlib import Path

import pytest
from conftest import REPO

from relay.cli import main
from relay.cli.edge.table import EDGE_DOCS
from relay.cli.proxy.table import PROXY_DOCS
from relay.cli.settings_docs import documents, stale, toml_value
from relay.settings import Settings
from relay.settings.usage import Mode, usage

DOCUMENTS = sorted(documents(REPO))


def test_generated_documents_are_up_to_date() -> None:
    paths = sorted(map(str, stale(REPO)))
    assert not paths, f"stale: {', '.join(paths)}; run `relay settings-docs`"


@pytest.mark.parametrize("changed", DOCUMENTS, ids=str)
def test_check_reports_a_stale_document_and_a_run_rewrites_it(
    changed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in DOCUMENTS:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / path, tmp_path / path)
    assert main(["settings-docs", str(tmp_path), "--check"]) == 0
    assert capsys.readouterr() == ("", "")
    text = (tmp_path / changed).read_text()
    described = Settings.model_fields["idempotency_ttl"].description
    if changed == Path(EDGE_DOCS):  # the table of Edge's options
        described = "`REDIS_URL`"
    if changed == Path(PROXY_DOCS):  # the table of the Proxy's variables
        described = "| `UNLEASH_TAGS` |"
    assert described and described in text
    (tmp_path / changed).write_text(text.replace(described, "Seconds a key is kept"))

    assert main(["settings-docs", str(tmp_path), "--check"]) == 1
    assert capsys.readouterr().err == f"relay: stale: {changed} (run `relay settings-docs`)\n"
    assert main(["settings-docs", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"rewrote {changed}\n"
    assert (tmp_path / changed).read_text() == text


def test_check_without_the_documents_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["settings-docs", str(tmp_path), "--check"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("relay: error:") and "docs/settings.md" in line


@pytest.mark.parametrize(
    "value", ['say "hi"\\\n\tnow', "é ☃", 0, 97280, 10.0, 1e20, True, [], ["a:b.c", "d"]]
)
def test_toml_values_read_back(value: object) -> None:
    assert tomllib.loads(f"x = {toml_value(value)}")["x"] == value


@pytest.mark.parametrize("value", [None, math.inf, {"a": 1}])
def test_no_toml_for_other_values(value: object) -> None:
    with pytest.raises(TypeError):
        toml_value(value)


def test_a_mode_s_settings_say_so_in_their_description() -> None:
    """The description (docs/settings.md, --help) and the Usage (config files' sections) agree."""
    for name, field in Settings.model_fields.items():
        mode = usage(field).mode
        assert (field.description or "").startswith("Relay:") == (mode is Mode.EDGE), name
        if (field.description or "").startswith("Standalone:"):
            assert mode is Mode.CENTRAL, name
