"""The supervisor of ``workers`` server processes (the design: ``relay.process.server``).

``relay serve`` does the start-up work with the settings parsed (the ``initialise`` child,
binding the sockets), then ``start`` replaces the process (same PID, signals and exit code
unchanged for the orchestrator) with a fresh interpreter running ``main``, which imports
only the standard library and ``relay.logs``. The process that stays for the service's
lifetime then holds ~10 MB instead of the ~26 MB (PSS) of pydantic and the command line:
sidecars are counted by the megabyte.

Its plan (the settings' JSON for the workers, their sockets' descriptors) comes through an
unnamed in-memory file, never the command line or the environment, which other users can
read.
"""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, NoReturn

from relay import logs

if TYPE_CHECKING:
    from relay.settings import Settings

log = logging.getLogger("relay.process.supervisor")  # also when run as __main__

BACKLOG = 128  # aiohttp's own default


def start(settings: Settings, sockets: list[socket.socket], shared_bytes: int) -> NoReturn:
    """Become the supervisor of one worker per socket, and of the memory they share
    (``relay.api.shared``: ``shared_bytes`` of it, made here so that it lives as long as
    the supervisor, and no worker outlives it)."""
    metrics_dir = metrics_files(settings.data_dir)
    for sock in sockets:
        sock.set_inheritable(True)
    shared = os.memfd_create("relay-shared", 0)  # inheritable: not CLOEXEC
    os.ftruncate(shared, shared_bytes)
    plan = {
        "settings": settings.model_dump_json(),
        "sockets": [sock.fileno() for sock in sockets],
        "shared": shared,
        "metrics_dir": str(metrics_dir),
        # a worker may take this long to stop: finish requests, then (leader) the final flush
        "grace": settings.shutdown_timeout + settings.final_flush_timeout + 10.0,
        "log_level": settings.log_level,
        "log_format": settings.log_format.value,
    }
    fd = unnamed_file(json.dumps(plan).encode())
    sys.stdout.flush()  # exec drops what the buffers still hold
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, "-m", "relay.process.supervisor", str(fd)])


def main(argv: list[str]) -> int:
    """``python -m relay.process.supervisor PLAN_FD``."""
    with open(int(argv[0]), "rb") as source:
        plan = json.loads(source.read())
    logs.configure(plan["log_level"], logs.LogFormat(plan["log_format"]))
    sockets = [socket.socket(fileno=fd) for fd in plan["sockets"]]
    supervisor = Supervisor(plan["settings"].encode(), plan["metrics_dir"], plan["grace"])
    return supervisor.run(sockets, plan["shared"])


class Supervisor:
    def __init__(self, settings: bytes, metrics_dir: str, grace: float) -> None:
        self._settings = settings
        self._metrics_dir = metrics_dir
        self._grace = grace
        self._workers: list[subprocess.Popen[bytes]] = []

    def run(self, sockets: list[socket.socket], shared: int) -> int:
        stopping: list[int] = []
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        previous_fd = signal.set_wakeup_fd(wake_w)
        watched = (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD)
        handlers = {s: signal.signal(s, _record(stopping)) for s in watched}
        try:
            for index, sock in enumerate(sockets):
                self._workers.append(
                    spawn(
                        self._settings,
                        "worker",
                        str(index),
                        str(os.getpid()),
                        str(shared),
                        sock=sock,
                        shared=shared,
                        env={"PROMETHEUS_MULTIPROC_DIR": self._metrics_dir},
                    )
                )
                sock.close()  # the worker has its own; its exit then closes the socket
            failed = self._watch(stopping, wake_r)
            return self._stop_all() or failed
        finally:
            for sock in sockets:
                sock.close()
            shutil.rmtree(self._metrics_dir, ignore_errors=True)
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
            signal.set_wakeup_fd(previous_fd)
            os.close(wake_r)
            os.close(wake_w)

    def _watch(self, stopping: list[int], wake_r: int) -> int:
        """Until a stop signal (0) or a worker's exit (1)."""
        while not stopping:
            for index, worker in enumerate(self._workers):
                if worker.poll() is not None:
                    log.error(
                        "worker exited: stopping the others",
                        extra={"worker": index, "pid": worker.pid, "exit": worker.returncode},
                    )
                    return 1
            select.select([wake_r], [], [], 1.0)
            while True:  # drain the wake-up bytes of handled signals
                try:
                    if not os.read(wake_r, 64):
                        break
                except BlockingIOError:
                    break
        log.info("stopping workers", extra={"signal": signal.Signals(stopping[0]).name})
        return 0

    def _stop_all(self) -> int:
        """The leader last, after the others have committed their last requests; 1 when a
        worker did not exit cleanly."""
        failed = 0
        leader, others = self._workers[0], self._workers[1:]
        for group in (others, [leader]):
            for worker in group:
                if worker.poll() is None:
                    worker.send_signal(signal.SIGTERM)
            for worker in group:
                try:
                    worker.wait(self._grace)
                except subprocess.TimeoutExpired:
                    log.error("worker did not stop in time: killed", extra={"pid": worker.pid})
                    worker.kill()
                    worker.wait()
                failed |= worker.returncode != 0
        return failed


def spawn(
    settings: bytes,
    *args: str,
    sock: socket.socket | None = None,
    shared: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """``python -m relay.process.server ARGS [FD]``, given the settings' JSON on stdin; the
    shared memory's descriptor ``shared`` passed on as it is (named in ``ARGS``)."""
    fds = () if sock is None else (sock.fileno(),)
    child = subprocess.Popen(
        [sys.executable, "-m", "relay.process.server", *args, *(str(fd) for fd in fds)],
        stdin=subprocess.PIPE,
        pass_fds=fds if shared is None else (*fds, shared),
        env={**os.environ, **(env or {})},
    )
    assert child.stdin is not None
    child.stdin.write(settings)
    child.stdin.close()
    return child


def bind(host: str, port: int, count: int) -> list[socket.socket]:
    """One socket per worker, bound before any start-up work writes (migrations, first-start
    keys), so that a port in use stops ``relay serve`` before it has changed anything, and
    not yet listening, so that nothing connects before the service can answer (``listen``).
    A plain bind first: ``SO_REUSEPORT`` alone would join another relay already listening on
    the port as the same user; one socket alone does without it."""
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if count > 1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def listen(sockets: list[socket.socket]) -> None:
    """Every worker's socket listening before the workers start, so that connections queue
    from the start for every worker (the kernel spreads them by ``SO_REUSEPORT``)."""
    for sock in sockets:
        sock.listen(BACKLOG)


def unnamed_file(data: bytes) -> int:
    """An inheritable descriptor of a file holding ``data`` that no path leads to: in
    memory on Linux, else a temporary file already unlinked."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("relay-supervisor", 0)
    else:
        with tempfile.TemporaryFile() as unlinked:
            fd = os.dup(unlinked.fileno())
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    os.set_inheritable(fd, True)
    return fd


def _record(stopping: list[int]) -> Callable[[int, FrameType | None], None]:
    """SIGCHLD only wakes the supervisor (through the wake-up fd) to look at its workers."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGCHLD:
            stopping.append(signum)

    return handler


MEMORY = Path("/dev/shm")
METRICS_PREFIX = "relay-metrics-"


def metrics_files(data_dir: Path) -> Path:
    """A new directory for prometheus_client's multiprocess files, in memory when there is
    a memory file system. Those files are mapped into memory and grown sparse: on a full
    disk, a worker's first write into a page of one is a SIGBUS (measured: a relay with two
    workers restarted on its full 6 MiB disk lost a worker at its first request, and so
    could not start to drain the disk). Without ``/dev/shm``: a new directory under
    ``<data_dir>/prometheus``. Each supervisor has its own (instances sharing a data
    directory never sum or delete each other's files); those of supervisors gone (killed
    by SIGKILL) are deleted."""
    parent = MEMORY
    if not (MEMORY.is_dir() and os.access(MEMORY, os.W_OK | os.X_OK)):
        parent = data_dir / "prometheus"
        parent.mkdir(parents=True, exist_ok=True)
        for older in parent.glob("*.db"):  # files of a relay before this layout
            older.unlink()
    for stale in parent.glob(f"{METRICS_PREFIX}*-*"):
        if _left_behind(stale):
            shutil.rmtree(stale, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{METRICS_PREFIX}{os.getpid()}-", dir=parent))


def _left_behind(path: Path) -> bool:
    """Ours, and its supervisor (whose PID it is named by) is gone: killed by SIGKILL."""
    pid = path.name.removeprefix(METRICS_PREFIX).partition("-")[0]
    try:
        if not pid.isdigit() or path.lstat().st_uid != os.getuid():
            return False
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process, or the directory just went
        return False
    return False


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
