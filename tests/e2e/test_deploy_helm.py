"""Every rendering of the Helm charts, checked with the real tools.

- The Helm chart (helm/relay) and the example application chart with the relay as a sidecar
  (helm/examples/app-with-sidecar) are linted and rendered by Helm's own Go library
  (helm-python-sdk), for the defaults and every values file in helm/relay/examples/.
- Every rendered manifest is validated against the Kubernetes 1.30 schemas, strictly
  (kubernetes-validate); the two prometheus-operator kinds have no schema there and are
  checked against the Service and pods they select.
- Every relay container is hardened, its grace period outlasts the final flush, and the
  environment it is handed passes the real settings model.
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
from deploy import (
    ADMIN,
    CHART,
    CLIENT,
    DATABASE,
    EXAMPLES,
    KUBE_VERSION,
    ROOT,
    env_values,
    example,
    pod_specs,
    relay_containers,
    render_chart,
    stop_seconds,
)

from relay.settings import load_settings

pytestmark = pytest.mark.deploy

CASES = ["defaults", *EXAMPLES, "app-with-sidecar"]


def render_case(case: str, app_chart: Path) -> list[dict[str, Any]]:
    if case == "defaults":
        return render_chart(CHART)
    if case == "app-with-sidecar":
        return render_chart(app_chart, release="shop")
    return render_chart(CHART, example(case))


@pytest.fixture(params=CASES)
def manifests(request: pytest.FixtureRequest, app_chart: Path) -> list[dict[str, Any]]:
    return render_case(request.param, app_chart)


@pytest.mark.parametrize("case", ["defaults", *EXAMPLES])
def test_helm_lint_passes(case: str) -> None:
    values = None if case == "defaults" else example(case)
    report = helm.lint(CHART, values, strict=True, kube_version=f"v{KUBE_VERSION}")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["total_charts_linted"] == 1
    assert not problems and not report["errors"], report


def test_helm_lint_passes_for_the_application_chart(app_chart: Path) -> None:
    report = helm.lint(app_chart, strict=True, with_subcharts=True, kube_version=f"v{KUBE_VERSION}")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert not problems and not report["errors"], report


def test_every_manifest_is_valid_for_kubernetes_1_30(manifests: list[dict[str, Any]]) -> None:
    assert manifests
    services = {d["metadata"]["name"]: d for d in manifests if d["kind"] == "Service"}
    for doc in manifests:
        if doc["apiVersion"] == "monitoring.coreos.com/v1":
            check_monitor(doc, services, manifests)
            continue
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        try:
            kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            raise AssertionError(f"{name}: {path}: {exc.message}") from None


def check_monitor(
    doc: dict[str, Any], services: dict[str, dict[str, Any]], docs: list[dict[str, Any]]
) -> None:
    """prometheus-operator CRDs: no Kubernetes schema, so check what they point at."""
    spec = doc["spec"]
    selector = spec["selector"]["matchLabels"]
    assert selector, doc
    if doc["kind"] == "ServiceMonitor":
        [service] = [
            s for s in services.values() if s["metadata"]["labels"].items() >= selector.items()
        ]
        ports = {p["name"] for p in service["spec"]["ports"]}
        endpoints = spec["endpoints"]
    else:
        assert doc["kind"] == "PodMonitor", doc
        pods = [
            (template, s)
            for template, s in pod_specs(docs)
            if template["spec"]["template"]["metadata"]["labels"].items() >= selector.items()
        ]
        ports = {
            p["name"]
            for _, s in pods
            for c in [*s.get("initContainers", []), *s["containers"]]
            for p in c.get("ports", [])
        }
        endpoints = spec["podMetricsEndpoints"]
        if not pods:  # the relay chart alone: the application's pods are rendered elsewhere
            ports = {"relay"}  # the port "relay.sidecar" names (app-with-sidecar checks it)
    for endpoint in endpoints:
        assert set(endpoint) <= {"port", "path", "interval", "scrapeTimeout"}, endpoint
        assert endpoint["port"] in ports, (endpoint, ports)
        assert endpoint["path"] == "/internal-backstage/metrics"


def test_every_relay_container_is_hardened(manifests: list[dict[str, Any]]) -> None:
    for spec, container in relay_containers(manifests):
        security = container["securityContext"]
        assert security["runAsNonRoot"] is True
        assert security["runAsUser"] > 0
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert security["seccompProfile"] == {"type": "RuntimeDefault"}
        port = container["ports"][0]
        assert port["containerPort"] == int(env_values(container)["RELAY_PORT"])
        for probe, path in [("livenessProbe", "/health"), ("readinessProbe", "/ready")]:
            assert container[probe]["httpGet"] == {"path": path, "port": port["name"]}
        resources = container["resources"]
        assert {"cpu", "memory"} <= set(resources["requests"])
        assert "memory" in resources["limits"]
        # The data volume is the only writable path, and it is where the relay writes.
        [mount] = container["volumeMounts"]
        assert mount["mountPath"] == "/data" and not mount.get("readOnly")
        assert env_values(container)["RELAY_DATA_DIR"] == "/data"
        assert env_values(container)["TMPDIR"] == "/data"
        [volume] = [v for v in spec["volumes"] if v["name"] == mount["name"]]
        assert "persistentVolumeClaim" in volume or "emptyDir" in volume


def test_grace_period_outlasts_the_final_flush(manifests: list[dict[str, Any]]) -> None:
    for spec, container in relay_containers(manifests):
        assert spec["terminationGracePeriodSeconds"] > stop_seconds(container)


def test_grace_period_follows_the_timeouts() -> None:
    values = {"config": {"shutdown_timeout": 30, "final_flush_timeout": 45.5}}
    [(spec, container)] = relay_containers(render_chart(CHART, values))
    assert stop_seconds(container) == 80.5
    assert spec["terminationGracePeriodSeconds"] == math.ceil(80.5) + 10
    values["terminationGracePeriodSeconds"] = 81
    [(spec, _)] = relay_containers(render_chart(CHART, values))
    assert spec["terminationGracePeriodSeconds"] == 81


def test_rendered_environment_is_accepted_by_the_settings(
    manifests: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the chart hands the relay passes the real settings model."""
    secrets = {
        d["metadata"]["name"]: d.get("stringData", {}) for d in manifests if d["kind"] == "Secret"
    }
    containers = list(relay_containers(manifests))
    for _, container in containers:
        for name in list(os.environ):
            if name.startswith("RELAY_"):
                monkeypatch.delenv(name)
        for entry in container["env"]:
            if not entry["name"].startswith("RELAY_"):
                continue
            if "value" in entry:
                monkeypatch.setenv(entry["name"], entry["value"])
            elif "secretKeyRef" in entry["valueFrom"]:
                ref = entry["valueFrom"]["secretKeyRef"]
                # A Secret of the release, or a sample for an existingSecret.
                words = ref["key"].split("_")
                sample = ADMIN if "ADMIN" in words else DATABASE if "DATABASE" in words else CLIENT
                value = secrets.get(ref["name"], {}).get(ref["key"], sample)
                monkeypatch.setenv(entry["name"], value)
            else:
                assert entry["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
                monkeypatch.setenv(entry["name"], "pod-name-7d9f8")
        settings = load_settings()
        assert settings.listen_port == container["ports"][0]["containerPort"]
        assert str(settings.data_dir) == "/data"
        assert settings.host == "0.0.0.0"  # the kubelet's probes reach the pod's address
        names = {e["name"] for e in container["env"]}
        if settings.mode.value == "relay":
            wanted = {"upstream_url", "instance_id", "upstream_tokens", "client_tokens"}
        else:
            wanted = {"init_admin_api_tokens", "init_client_api_tokens"}
        assert {f"RELAY_{n.upper()}" for n in wanted | {"mode", "port", "data_dir"}} <= names


def test_chart_version_follows_the_project() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with helm.Chart.load(CHART) as chart:
        assert chart.metadata["appVersion"] == project["version"]
    [(_, container)] = relay_containers(render_chart(CHART))
    assert container["image"] == f"relay:{project['version']}"
