"""Moving from Unleash Edge (issue 24): ``relay edge`` started with the environment that
Edge's Helm chart example gives its container (``args: ["edge"]``, ``UPSTREAM_URL``,
``RUST_LOG``, ``LOG_FORMAT`` and ``TOKENS`` from a secret; ``BACKUP_FOLDER`` when relay
reads Edge's backups) serves real Python and Node SDKs their flags, and their counts
arrive upstream."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from edgekit import ADMIN, DEV, edge, standalone
from sdks import node_count
from service import free_port, stored, wait_until
from UnleashClient import UnleashClient
from UnleashClient.cache import FileCache

from relay.settings import Settings

pytestmark = pytest.mark.process

PYTHON_COUNTS, NODE_COUNTS = 7, 5


def test_edges_helm_chart_environment_serves_real_sdks(tmp_path: Path, node_sdk: Path) -> None:
    with standalone(tmp_path) as central:
        env = {
            "UPSTREAM_URL": central.url,
            "RUST_LOG": "warn",
            "LOG_FORMAT": "json",
            "TOKENS": DEV,
            "PORT": str(free_port()),  # the chart's 3063, apart for tests that run together
        }
        if "backup_folder" in Settings.model_fields:
            env["BACKUP_FOLDER"] = str(tmp_path / "backup")
        with edge(tmp_path / "relay", "edge", env=env) as served:
            client = UnleashClient(
                url=f"{served.url}/api",
                app_name="python-behind-relay",
                instance_id=f"python-{uuid.uuid4()}",
                custom_headers={"Authorization": DEV},
                metrics_interval=1,
                refresh_interval=60,
                cache=FileCache("edge-helm", directory=str(tmp_path / "sdk-cache")),
            )
            client.initialize_client()
            try:
                assert client.is_initialized
                answers = [client.is_enabled("edgeflag") for _ in range(PYTHON_COUNTS)]
                assert answers == [True] * PYTHON_COUNTS
                enabled = node_count(
                    node_sdk, served.url, DEV, "edgeflag", NODE_COUNTS, "node-behind-relay"
                )
                assert enabled is True
                expected = PYTHON_COUNTS + NODE_COUNTS
                wait_until(
                    lambda: stored(central.url, ADMIN, "edgeflag") >= expected,
                    f"{expected} counts of edgeflag stored upstream",
                    details=served.logs,
                )
            finally:
                client.destroy()
        assert stored(central.url, ADMIN, "edgeflag") == expected
