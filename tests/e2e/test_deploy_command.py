"""The image's entrypoint and command, run as a container runs them (the program from this
virtualenv): Edge's Helm chart's ``args: ["edge"]`` is ``relay edge``, options alone are
``relay serve``'s (``docker run IMAGE --mode relay``), no args the image's ``serve``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from deploy import image_argv
from edgekit import DEV, flag_of, standalone
from service import running

pytestmark = [pytest.mark.deploy, pytest.mark.process]

VENV_BIN = Path(sys.executable).parent


def program(args: list[str] | None) -> list[str]:
    name, *rest = image_argv(args)
    return [str(VENV_BIN / name), *rest]


def test_the_image_runs_edges_chart_and_our_own_invocations(tmp_path: Path) -> None:
    with standalone(tmp_path) as central:
        edge_chart = {"UPSTREAM_URL": central.url, "TOKENS": DEV}  # Edge's chart: env, args
        for name, args, env, mode in [
            ("chart", ["edge"], edge_chart, "relay"),
            ("edge", ["edge", "-u", central.url, "-t", DEV], {}, "relay"),
            (
                "options",
                ["--mode", "relay", "--upstream-url", central.url, "--upstream-tokens", DEV],
                {"RELAY_CLIENT_TOKENS": DEV},
                "relay",
            ),
        ]:
            with running(tmp_path / name, env=env, program=program(args)) as served:
                assert flag_of(served.url, DEV) is True, name
                assert f"({mode} mode)" in served.logs(), name
        with running(tmp_path / "default", program=program(None)) as served:
            assert "(standalone mode)" in served.logs()
