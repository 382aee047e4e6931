"""What the deployment tests share: the artefacts' paths, sample keys, the Helm charts
rendered by Helm's own Go library (helm-python-sdk) and picked apart, and the Dockerfile read
as instructions.

The tests themselves are split by concern: ``test_deploy_helm.py`` (every rendering),
``test_deploy_examples.py`` (each example's shape), ``test_deploy_values.py`` (bad values),
``test_deploy_dockerfile.py`` (the file) and ``test_deploy_image.py`` (its steps, run).
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helm_python as helm
import yaml

from relay.settings import Settings

ROOT = Path(__file__).parent.parent
CHART = ROOT / "helm" / "relay"
APP_CHART = ROOT / "helm" / "examples" / "app-with-sidecar"
DOCKERFILE = ROOT / "Dockerfile"
KUBE_VERSION = "1.30.0"
EXAMPLES = sorted(p.name for p in (CHART / "examples").glob("*.yaml"))

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


def resolved_app_chart(folder: Path) -> Path:
    """The application chart with its file:// dependency resolved, in a copy of helm/ made in
    ``folder`` (the ``app_chart`` fixture, conftest.py)."""
    copy = folder / "helm"
    shutil.copytree(ROOT / "helm", copy, ignore=shutil.ignore_patterns("charts", "Chart.lock"))
    app = copy / APP_CHART.relative_to(ROOT / "helm")
    helm.dependency_update(app)
    assert [d["status"] for d in helm.dependency_list(app)] == ["ok"]
    return app


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


def stop_seconds(container: dict[str, Any]) -> float:
    """preStop sleep + in-flight requests + final flush, as the relay will read them."""
    env = env_values(container)
    defaults = {name: field.default for name, field in Settings.model_fields.items()}
    shutdown = float(env.get("RELAY_SHUTDOWN_TIMEOUT", defaults["shutdown_timeout"]))
    flush = float(env.get("RELAY_FINAL_FLUSH_TIMEOUT", defaults["final_flush_timeout"]))
    sleep = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {}).get("seconds", 0)
    return float(shutdown + flush + sleep)


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


def image_argv(args: list[str] | None = None) -> list[str]:
    """What a container of the image runs: the entrypoint, then its args (Kubernetes' ``args``,
    ``docker run IMAGE ARGS...``) or, without any, the image's command."""
    final = {word: value for stage, word, value in instructions() if stage == instructions()[-1][0]}
    entrypoint: list[str] = json.loads(final["ENTRYPOINT"])
    command: list[str] = json.loads(final.get("CMD", "[]"))
    return [*entrypoint, *(command if args is None else args)]
