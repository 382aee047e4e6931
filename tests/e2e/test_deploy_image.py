"""The image's steps, run: the Dockerfile's COPY and pip steps as written, into a fresh
virtualenv, whose ``relay`` then serves (a standalone, and a relay in front of it) from a
read-only root with only the data directory writable, as the image's user. Needs root for the
mount namespace; no Docker daemon.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from deploy import ADMIN, CLIENT, ROOT, image_argv, instructions, stage_env
from service import free_port, wait_ready

pytestmark = pytest.mark.deploy


def run_step(command: str, cwd: Path, env: dict[str, str], paths: dict[str, Path]) -> None:
    for inside, outside in paths.items():
        command = re.sub(rf"(?<![\w/]){re.escape(inside)}(?=/|\s|$)", str(outside), command)
    result = subprocess.run(
        ["sh", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=400
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def open_python() -> str:
    """An interpreter of this minor version that the image's user can run, as the image's
    /usr/local/bin one is: the relay starts its service by running its interpreter again
    (``exec``), which needs every directory up to it open to that user (a pyenv under a
    0700 /root is not)."""
    minor = "python{}.{}".format(*sys.version_info[:2])
    for candidate in (sys.executable, f"/usr/local/bin/{minor}", f"/usr/bin/{minor}"):
        real = Path(candidate).resolve()
        if real.is_file() and all(p.stat().st_mode & 0o001 for p in real.parents):
            return str(real)
    pytest.fail(f"no {minor} outside private directories for the image's user")


def build_like_the_dockerfile(tmp: Path) -> tuple[Path, dict[str, str]]:
    """Run the Dockerfile's COPY and pip steps into a virtualenv; return it and the image env."""
    bases = [args for _, word, args in instructions() if word == "FROM"]
    minor = re.match(r"python:(3\.\d+)", bases[-1])
    assert minor and minor.group(1) == "{}.{}".format(*sys.version_info[:2]), (
        f"the image runs Python {minor and minor.group(1)}; these steps run here on "
        f"{sys.version_info[0]}.{sys.version_info[1]}"
    )
    venv = tmp / "venv"
    subprocess.run([open_python(), "-m", "venv", str(venv)], check=True, timeout=120)
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
    entrypoint = [relay, *image_argv()[1:]]  # no args: the image's command, `serve`
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
