"""The docs' promises: every ``sh`` block of README.md and docs/*.md is run here (or said not
runnable, and why), and every relative link and anchor between the documents resolves (their
settings table: test_settings_docs.py)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from conftest import REPO
from service import free_port, get_json, stored, wait_ready

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# the documents whose links are checked: the docs, and those that link to them
OTHERS = ("SECURITY.md", "ARCHITECTURE.md", "bench/README.md", "helm/relay/README.md")
LINKED = [*DOCS, *(REPO / name for name in OTHERS)]
MARKED_BLOCK = re.compile(r"^(?:<!-- ([^\n]+?) -->\n)?```sh\n(.*?)\n```", re.MULTILINE | re.DOTALL)
# the blocks each test here runs, by the name of their marker (<!-- run: NAME -->)
RUN_HERE = {"start-command", "test-command", "five-minutes", "rollout"}


def blocks(name: str) -> str:
    """The ``sh`` blocks marked ``name``, in the order a reader meets them (README first)."""
    found = [
        code
        for doc in DOCS
        for marker, code in MARKED_BLOCK.findall(doc.read_text())
        if marker in (name, f"run: {name}")
    ]
    assert found, name
    return "\n".join(found)


def node_block() -> str:
    """The README's Node SDK example, run after the five minutes with their key."""
    match = re.search(r"<!-- run: node-sdk -->\n```js\n(.+?)\n```", DOCS[0].read_text(), re.S)
    assert match
    return match.group(1)


def test_every_sh_block_is_run_or_says_why_not() -> None:
    run = set()
    for doc in DOCS:
        for marker, _ in MARKED_BLOCK.findall(doc.read_text()):
            where = f"{doc.relative_to(REPO)}: a sh block"
            assert marker, f"{where} with no <!-- run: NAME --> or <!-- not run: REASON -->"
            if marker.startswith("not run:"):
                assert len(marker) > len("not run: ") + 10, f"{where} not run with no reason"
            else:
                run.add(marker.removeprefix("run: "))
    assert run == RUN_HERE


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def unfenced(text: str) -> str:
    """``text`` without its fenced blocks, where a ``#`` is no heading."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def prose(text: str) -> str:
    """``text`` without its fenced blocks and code spans, where brackets are not links."""
    return re.sub(r"`[^`\n]*`", "", unfenced(text))


def anchors(doc: Path) -> set[str]:
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", unfenced(doc.read_text()), re.MULTILINE):
        base = slug(heading)
        seen[base] = seen.get(base, -1) + 1
        seen.setdefault(f"{base}-{seen[base]}" if seen[base] else base, 0)
    return set(seen)


@pytest.mark.parametrize("doc", LINKED, ids=lambda d: str(d.relative_to(REPO)))
def test_relative_links_and_anchors_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)\s]+)\)", prose(doc.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (doc.parent / path).resolve() if path else doc
        assert linked.exists(), f"{doc.name}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{doc.name}: {target}"


def test_ci_runs_the_readme_test_command() -> None:
    assert blocks("test-command") in (REPO / ".ci" / "run").read_text()


@pytest.mark.process
@pytest.mark.deploy
def test_the_readme_path_works_on_a_fresh_copy(tmp_path: Path, node_sdk: Path) -> None:
    """Install into a new virtualenv from a copy of the tracked files and start, with the
    README's command as it is (only ``RELAY_PORT`` is set: a free port, not 4242). The service
    answering there is proven to be the one started: the admin key it printed once on its
    stdout opens an admin endpoint, which no other server would answer 200. Then the README's
    five minutes and the roll-out of docs/standalone.md, in one shell in that copy, exactly as
    written (their port is RELAY_PORT's, as the service's): a key made, a flag turned on,
    the real Python and Node SDKs seeing it."""
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    copy = tmp_path / "checkout"
    for name in files:
        if (REPO / name).is_file():
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, copy / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RELAY_", "VIRTUAL_ENV"))}
    port = free_port()
    env["RELAY_PORT"] = str(port)
    out = tmp_path / "out.txt"
    with out.open("w") as stdout:
        process = subprocess.Popen(
            ["bash", "-c", blocks("start-command")],
            cwd=copy,
            env=env,
            stdout=stdout,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        # pip installs into the new virtualenv first: minutes on a slow network
        wait_ready(url, process, timeout=600, path="/health", details=out.read_text)
        assert (copy / "data" / "relay.db").is_file()
        printed = out.read_text()
        assert "shown only now" in printed
        [admin] = re.findall(r"^\s+admin\s+(\S+)$", printed, re.MULTILINE)
        assert get_json(f"{url}/api/admin/projects/default", admin)["id"] == "default"

        node = f"node - <<'JS'\n{node_block()}\nJS"
        script = "\n".join([blocks("five-minutes"), node, blocks("rollout")])
        shell = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", script],  # the port: RELAY_PORT, as written
            cwd=copy,
            env={**env, "NODE_PATH": str(node_sdk)},
            capture_output=True,
            text=True,
            timeout=600,
        )
        said = shell.stdout
        assert shell.returncode == 0, shell.stdout + shell.stderr
        assert said.count("new-checkout is on") == 2, said  # Python, then Node
        assert re.search(r"^HTTP/1.1 202", said, re.MULTILINE), said
        # the Python SDK's one evaluation, sent as it stopped, and the 3 posted (the Node
        # SDK's destroy() sends none)
        assert stored(url, admin, "new-checkout") == 4
        strategies = get_json(
            f"{url}/api/admin/projects/default/features/new-checkout/environments/development"
            "/strategies",
            admin,
        )
        assert [s["parameters"]["rollout"] for s in strategies] == ["100", "25"]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(30)
