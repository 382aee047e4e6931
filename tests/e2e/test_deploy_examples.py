"""The shape each example of the Helm chart renders: standalone on SQLite and on PostgreSQL,
the relay as a Deployment, and the relay as a sidecar of the example application chart (its
named templates, as the READMEs show them); keys and the database URL only in Secrets.
"""

from __future__ import annotations

import json
from pathlib import Path

import helm_python as helm
import pytest
from deploy import (
    ADMIN,
    APP_CHART,
    CHART,
    CLIENT,
    DATABASE,
    ROOT,
    documents,
    env_values,
    example,
    kinds,
    pod_specs,
    relay_containers,
    render_chart,
    stop_seconds,
)

pytestmark = pytest.mark.deploy


def test_standalone_shape(app_chart: Path) -> None:
    docs = render_chart(CHART, example("standalone.yaml"))
    assert kinds(docs) == [
        "Deployment",
        "PersistentVolumeClaim",
        "PodDisruptionBudget",
        "Service",
        "ServiceMonitor",
    ]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}
    [(spec, container)] = relay_containers(docs)
    assert env_values(container)["RELAY_MODE"] == "standalone"
    assert container["ports"][0]["containerPort"] == 4242
    [claim] = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    [volume] = spec["volumes"]
    assert volume["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
    secret_refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secret_refs == {"relay-keys"}  # existingSecret


def test_standalone_keys_in_a_secret_of_the_chart() -> None:
    values = {"tokens": {"initAdmin": [ADMIN], "initClient": [CLIENT, CLIENT.replace("d", "p")]}}
    docs = render_chart(CHART, values)
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    assert secret["stringData"] == {
        "RELAY_INIT_ADMIN_API_TOKENS": ADMIN,
        "RELAY_INIT_CLIENT_API_TOKENS": f"{CLIENT},{CLIENT.replace('d', 'p')}",
    }
    [(_, container)] = relay_containers(docs)
    assert not any(ADMIN in json.dumps(e) for e in container["env"]), "keys only via the Secret"
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    before = deployment["spec"]["template"]["metadata"]["annotations"]["checksum/secret"]
    values["tokens"]["initAdmin"] = [ADMIN + "x"]
    [deployment] = [d for d in render_chart(CHART, values) if d["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["metadata"]["annotations"]["checksum/secret"] != before


def test_standalone_on_postgresql_shape() -> None:
    """Replicas share the database named in the Secret; no volume is claimed."""
    docs = render_chart(CHART, example("standalone-postgres.yaml"))
    assert kinds(docs) == ["Deployment", "PodDisruptionBudget", "Service"]
    [deployment] = [d for d in docs if d["kind"] == "Deployment"]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    [(spec, container)] = relay_containers(docs)
    [volume] = spec["volumes"]
    assert "persistentVolumeClaim" not in volume
    [url] = [e for e in container["env"] if e["name"] == "RELAY_DATABASE_URL"]
    ref = url["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "relay-keys", "key": "RELAY_DATABASE_URL", "optional": False}


def test_standalone_database_url_in_a_secret_of_the_chart() -> None:
    values = {"replicaCount": 2, "database": {"url": DATABASE}, "tokens": {"initAdmin": [ADMIN]}}
    docs = render_chart(CHART, values)
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    assert secret["stringData"]["RELAY_DATABASE_URL"] == DATABASE
    [(_, container)] = relay_containers(docs)
    assert not any("deploy-test-password" in json.dumps(e) for e in container["env"])
    assert "PersistentVolumeClaim" not in kinds(docs)
    without = render_chart(CHART, {"tokens": {"initAdmin": [ADMIN]}})
    [(_, container)] = relay_containers(without)
    assert "RELAY_DATABASE_URL" not in {e["name"] for e in container["env"]}  # SQLite


def test_relay_deployment_shape() -> None:
    values = example("relay-deployment.yaml")
    docs = render_chart(CHART, values, release="edge")
    assert kinds(docs) == [
        "Deployment",
        "PodDisruptionBudget",
        "Secret",
        "Service",
        "ServiceMonitor",
    ]
    [service] = [d for d in docs if d["kind"] == "Service"]
    assert service["metadata"]["name"] == "edge-relay"
    assert service["spec"]["ports"] == [
        {"name": "http", "port": 3063, "targetPort": "http", "protocol": "TCP"}
    ]
    [(spec, container)] = relay_containers(docs)
    env = env_values(container)
    assert (env["RELAY_MODE"], env["RELAY_PORT"]) == ("relay", "3063")
    assert env["RELAY_UPSTREAM_URL"] == values["upstream"]["url"]
    assert env["RELAY_BUFFER_MAX_BYTES"] == "536870912"  # not 5.36870912e+08
    [secret] = [d for d in docs if d["kind"] == "Secret"]
    assert secret["stringData"]["RELAY_UPSTREAM_TOKENS"] == ",".join(values["tokens"]["upstream"])
    [upstream_ref] = [e for e in container["env"] if e["name"] == "RELAY_UPSTREAM_TOKENS"]
    assert upstream_ref["valueFrom"]["secretKeyRef"] == {
        "name": secret["metadata"]["name"],
        "key": "RELAY_UPSTREAM_TOKENS",
        "optional": False,
    }
    assert "emptyDir" in spec["volumes"][0]


def test_sidecar_shape_renders_only_the_secret_and_monitor() -> None:
    docs = render_chart(CHART, example("sidecar.yaml"), release="shop")
    assert kinds(docs) == ["PodMonitor", "Secret"]


def test_application_chart_runs_the_relay_as_a_sidecar(app_chart: Path) -> None:
    docs = render_chart(app_chart, release="shop")
    [(deployment, spec)] = list(pod_specs(docs))
    assert deployment["metadata"]["name"] == "shop"
    [relay] = spec["initContainers"]
    assert relay["name"] == "relay" and relay["restartPolicy"] == "Always"  # native sidecar
    assert [c["name"] for c in spec["containers"]] == ["shop"]
    [app] = spec["containers"]
    assert env_values(app)["UNLEASH_URL"] == "http://localhost:3063/api"
    assert env_values(relay)["RELAY_MODE"] == "relay"
    assert {v["name"] for v in spec["volumes"]} == {"relay-data"}
    # The grace period covers the application's own stop and then the relay's.
    assert spec["terminationGracePeriodSeconds"] > 15 + stop_seconds(relay)
    # The relay chart as a dependency adds no workload, only its PodMonitor here.
    assert kinds(docs) == ["Deployment", "PodMonitor", "Service"]


def test_documented_sidecar_includes_are_the_example_ones() -> None:
    """The include lines docs/relays.md and the chart's README show are those of the chart
    rendered above."""
    example_template = (APP_CHART / "templates" / "deployment.yaml").read_text()
    for readme in [ROOT / "docs" / "relays.md", CHART / "README.md"]:
        shown = [
            line.strip()
            for line in readme.read_text().splitlines()
            if 'include "relay.sidecar' in line
        ]
        assert len(shown) == 2, readme
        for line in shown:
            assert line in example_template, (readme, line)


def test_sidecar_can_be_a_regular_container(app_chart: Path) -> None:
    with helm.Chart.load(app_chart) as chart:
        values = {"relay": {"sidecar": {"native": False}}}
        rendered = chart.render(values, name="shop")
    [(_, spec)] = list(pod_specs(documents(rendered)))
    [relay] = spec["initContainers"]
    assert "restartPolicy" not in relay


def test_sidecar_template_needs_sidecar_mode(app_chart: Path) -> None:
    with helm.Chart.load(app_chart) as chart, pytest.raises(helm.HelmRenderError, match="sidecar"):
        chart.render({"relay": {"mode": "relay"}}, name="shop")


TOKENS_REF = {"secretKeyRef": {"name": "unleash-edge-tokens", "key": "tokens"}}
EDGE_CHART_VALUES = {  # Edge's chart's own values (unleash/unleash-edge), as its users set them
    "edge": {"upstreamUrl": "http://unleash.unleash:4242", "logLevel": "warn", "logFormat": "json"},
    "existingSecrets": [{"name": "TOKENS", "valueFrom": TOKENS_REF}],
    "env": [{"name": "METRICS_INTERVAL_SECONDS", "value": "60"}],
}


def test_edges_chart_values_translated_are_accepted_and_render_a_strict_relay() -> None:
    """from-edge.yaml passes values.schema.json (Edge's values as they are do not: they need
    the translation of docs/edge.md) and renders a relay as Edge's chart configured it."""
    values = example("from-edge.yaml")
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
        for name, value in EDGE_CHART_VALUES.items():
            with pytest.raises(helm.HelmValuesError, match=name):
                chart.validate_schema({**values, name: value})
    docs = render_chart(CHART, values)
    [(_, container)] = relay_containers(docs)
    env = env_values(container)
    assert env["RELAY_MODE"] == "relay"
    assert env["RELAY_UPSTREAM_URL"] == "http://unleash.unleash:4242"  # edge.upstreamUrl
    assert (env["RELAY_STRICT_KEYS"], env["RELAY_LOG_LEVEL"]) == ("true", "WARNING")
    assert env["RELAY_FLUSH_INTERVAL"] == "60"
    assert container["ports"][0]["containerPort"] == 3063
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert {r["name"] for r in refs.values()} == {"unleash-edge-tokens"}
    assert set(refs) == {"RELAY_UPSTREAM_TOKENS", "RELAY_CLIENT_TOKENS"}


def test_a_proxys_deployment_translated_renders_a_relay_with_the_proxys_paths() -> None:
    """from-proxy.yaml (docs/proxy.md) passes the chart's schema and renders relay mode on the
    Proxy's port, with its keys as config and UNLEASH_API_TOKEN from the Secret; relay takes
    the settings it renders."""
    values = example("from-proxy.yaml")
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
    docs = render_chart(CHART, values)
    [(_, container)] = relay_containers(docs)
    env = env_values(container)
    assert env["RELAY_MODE"] == "relay" and container["ports"][0]["containerPort"] == 3000
    assert env["RELAY_PROXY_CLIENT_KEYS"] == "some-secret"
    assert (env["RELAY_DISABLE_ALL_ENDPOINT"], env["RELAY_FEATURES_REFRESH_INTERVAL"]) == (
        "true",
        "5",
    )
    refs = {
        e["name"]: e["valueFrom"]["secretKeyRef"]["name"]
        for e in container["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs == {
        "RELAY_UPSTREAM_TOKENS": "unleash-proxy",
        "RELAY_CLIENT_TOKENS": "unleash-proxy",
    }
    settings = {
        k.removeprefix("RELAY_").lower(): v for k, v in env.items() if k.startswith("RELAY_")
    }
    settings |= {"client_tokens": CLIENT, "upstream_tokens": CLIENT, "data_dir": "/tmp/x"}
    from relay.settings import load_settings

    assert load_settings(settings).proxy_client_keys == ["some-secret"]
