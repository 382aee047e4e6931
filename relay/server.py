"""How ``relay serve`` runs: one server process, or a supervisor of ``workers`` of them.

One process uses one core: its event loop validates and aggregates every body while holding
the GIL, and under load on a 2-core machine the second core stayed idle (bench/README.md).
With ``workers = N`` the process started becomes a supervisor of N workers, each a complete
server on its own ``SO_REUSEPORT`` socket (the kernel spreads connections over them), all
sharing one database, whose transactions keep "202 means durable" and idempotency exact:

- The supervisor has the one-time start-up work done first (``app.initialise`` in a child
  process: migrations, first-start keys, the relay's instance id), so the workers never race
  on it, and binds the workers' sockets, so a port in use is a start-up error. It imports
  neither the application nor prometheus_client: it stays small (about 35 MB resident).
- Worker 0 is the leader: the only one running the flusher, the buffer monitor and pruning.
  One flusher keeps upstream traffic at one request per environment per interval.
- SIGTERM or SIGINT to the supervisor stops the other workers first and the leader last, so
  the leader's final flush includes what the others committed while finishing requests.
- A worker that dies makes the supervisor stop the others and exit 1, so the orchestrator
  restarts the service (what was answered 202 is on disk and flushed after the restart).
  Workers end with the supervisor even when it is killed with SIGKILL (Linux only).
- Prometheus metrics are summed over the workers by prometheus_client's multiprocess mode
  (files in ``<data_dir>/prometheus``); that mode has no ``process_*`` metrics.

Workers and the start-up child are ``python -m relay.server``, given the settings as JSON on
stdin (never in the environment or the command line, which other users can read) and their
socket as an inherited file descriptor.
"""

from __future__ import annotations

import gc
import logging
import os
import select
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from relay import logs
from relay.settings import Settings

log = logging.getLogger(__name__)

# A bulk body allocates thousands of short-lived objects, all freed by reference counting.
# At CPython's default gen-0 threshold (700) the cyclic collector ran several times per
# request and rescanned every object alive since start-up: measured as 40 % of validation
# time and most of the p99 under load (bench/README.md). Start-up objects are frozen out of
# collection; young garbage is collected every 50,000 allocations instead of 700.
GC_GEN0_THRESHOLD = 50_000

_PR_SET_PDEATHSIG = 1
BACKLOG = 128  # aiohttp's own default
EXIT_CONFIG = 2


def serve(settings: Settings) -> int:
    logs.configure(settings.log_level, settings.log_format)
    if settings.workers == 1:
        _run(settings, worker=0, sock=None, name="")
        return 0
    return Supervisor(settings).run()


def _run(settings: Settings, worker: int, sock: socket.socket | None, name: str) -> None:
    from aiohttp import web

    from relay.app import build_app

    app = build_app(settings, worker)
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    web.run_app(
        app,
        host=None if sock else settings.host,
        port=None if sock else settings.listen_port,
        sock=sock,
        shutdown_timeout=settings.shutdown_timeout,
        keepalive_timeout=settings.idle_timeout,
        access_log=None,
        print=lambda _: print(
            f"relay {settings.mode.value}{name} listening on {settings.host}:"
            f"{settings.listen_port}",
            file=sys.stderr,
            flush=True,
        ),
    )


class Supervisor:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._workers: list[subprocess.Popen[bytes]] = []
        # a worker may take this long to stop: finish requests, then (leader) the final flush
        self._grace = settings.shutdown_timeout + settings.final_flush_timeout + 10.0

    def run(self) -> int:
        settings = self._settings
        initialised = _child(settings, "initialise")
        if initialised.wait() != 0:
            return initialised.returncode  # it has said why on stderr
        sockets = _listen(settings.host, settings.listen_port, settings.workers)
        metrics_dir = _empty_dir(settings.data_dir / "prometheus")
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
                    _child(
                        settings,
                        "worker",
                        str(index),
                        str(os.getpid()),
                        sock=sock,
                        env={"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
                    )
                )
                sock.close()  # the worker has its own; its exit then closes the socket
            failed = self._watch(stopping, wake_r)
            return self._stop_all() or failed
        finally:
            for sock in sockets:
                sock.close()
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


def _child(
    settings: Settings,
    *args: str,
    sock: socket.socket | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    fds = () if sock is None else (sock.fileno(),)
    child = subprocess.Popen(
        [sys.executable, "-m", "relay.server", *args, *(str(fd) for fd in fds)],
        stdin=subprocess.PIPE,
        pass_fds=fds,
        env={**os.environ, **(env or {})},
    )
    assert child.stdin is not None
    child.stdin.write(settings.model_dump_json().encode())
    child.stdin.close()
    return child


def _child_main(argv: list[str]) -> int:
    """``python -m relay.server initialise | worker INDEX SUPERVISOR FD``."""
    settings = Settings.model_validate_json(sys.stdin.buffer.read())
    if argv[0] == "initialise":
        return _initialise(settings)
    index, supervisor, fd = map(int, argv[1:])
    _attach_to(supervisor)
    logs.configure(settings.log_level, settings.log_format, worker=index)
    sock = socket.socket(fileno=fd)
    _run(settings, worker=index, sock=sock, name=f" worker {index}")
    return 0


def _initialise(settings: Settings) -> int:
    import asyncio

    from relay.app import initialise
    from relay.auth import InvalidKey
    from relay.store.errors import StorageError

    logs.configure(settings.log_level, settings.log_format)
    try:
        asyncio.run(initialise(settings))
    except (StorageError, InvalidKey, OSError) as exc:
        print(f"relay: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    return 0


def _attach_to(supervisor: int) -> None:
    """Signals come from the supervisor only: out of the terminal's process group, so
    Ctrl-C (or ``kill 0``) reaches the supervisor, which stops the workers in order. The
    kernel sends SIGTERM when the supervisor dies, even by SIGKILL, so no orphan keeps
    serving on the port; the check after it covers a supervisor already gone."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor:
        raise SystemExit("relay: the supervisor has exited")


def _record(stopping: list[int]) -> Callable[[int, FrameType | None], None]:
    """SIGCHLD only wakes the supervisor (through the wake-up fd) to look at its workers."""

    def handler(signum: int, frame: FrameType | None) -> None:
        if signum != signal.SIGCHLD:
            stopping.append(signum)

    return handler


def _listen(host: str, port: int, count: int) -> list[socket.socket]:
    """One listening socket per worker, bound here so that connections queue from the start
    for every worker (the kernel spreads them by ``SO_REUSEPORT``) and a port in use is a
    start-up error. A plain bind first: ``SO_REUSEPORT`` alone would join another relay
    already listening on the port as the same user."""
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
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def _empty_dir(path: Path) -> Path:
    """prometheus_client's multiprocess files of an earlier run would be summed in."""
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):
        stale.unlink()
    return path


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
