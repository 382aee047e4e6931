"""How ``relay serve`` runs: one server process, or a supervisor of ``workers`` of them.

One process uses one core: its event loop validates and aggregates every body while holding
the GIL, and under load on a 2-core machine the second core stayed idle (bench/README.md).
With ``workers = N`` the process started becomes a supervisor of N workers, each a complete
server on its own ``SO_REUSEPORT`` socket (the kernel spreads connections over them). In
standalone mode they share one database, whose transactions keep "202 means durable" and
idempotency exact; in relay mode each buffers in its own file (``relay.store.shards``).

- ``relay serve`` binds its sockets first, so that a port in use (or not allowed) is a
  start-up error that names the port and how to pick another, before anything is written:
  no migration, no first-start key is created for a service that cannot start. Then the
  one-time start-up work (``app.initialise`` in a child process: migrations, first-start
  keys, the relay's instance id) is done before the workers start, so they never race on
  it; one process does it in its own start-up. Then it becomes the supervisor
  (``relay.process.supervisor``): a fresh interpreter on the same PID that imports only the
  standard library, about 10 MB.
- Worker 0 is the leader: the only one running the flusher, the buffer monitor and pruning.
  One flusher keeps upstream traffic at one request per environment per interval.
- SIGTERM or SIGINT to the supervisor stops the other workers first and the leader last, so
  the leader's final flush includes what the others committed while finishing requests.
- A worker that dies makes the supervisor stop the others and exit 1, so the orchestrator
  restarts the service (what was answered 202 is on disk and flushed after the restart).
  Workers end with the supervisor even when it is killed with SIGKILL (Linux only).
- Prometheus metrics are summed over the workers by prometheus_client's multiprocess mode
  (files in memory, off the buffer's disk: ``supervisor.metrics_files``); that mode has no
  ``process_*`` metrics.

Workers and the start-up child are ``python -m relay.process.server``, given the settings as JSON on
stdin (never in the environment or the command line, which other users can read) and their
socket as an inherited file descriptor.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from relay import logs
from relay.api.shared import Shared, layout
from relay.process import supervisor
from relay.settings import Settings, cores
from relay.settings.fields import MAX_WORKERS

log = logging.getLogger("relay.process.server")

# A bulk body allocates thousands of short-lived objects, all freed by reference counting.
# At CPython's default gen-0 threshold (700) the cyclic collector ran several times per
# request and rescanned every object alive since start-up: measured as 40 % of validation
# time and most of the p99 under load (bench/README.md). Start-up objects are frozen out of
# collection; young garbage is collected every 50,000 allocations instead of 700.
GC_GEN0_THRESHOLD = 50_000

_PR_SET_PDEATHSIG = 1
EXIT_CONFIG = 2


OUR_PORT_OPTIONS = "--port N or RELAY_PORT=N"


def serve(
    settings: Settings, json_errors: bool = False, port_options: str = OUR_PORT_OPTIONS
) -> int:
    """``json_errors``: a start-up error is a JSON line (JSON logs asked for explicitly).
    ``port_options``: how the command that runs this sets the port, for the error when it
    cannot be bound (Edge's command line has its own)."""
    logs.configure(settings.log_level, settings.log_format)
    host, port = settings.host, settings.listen_port
    try:
        sockets = supervisor.bind(host, port, settings.workers)
    except OSError as exc:
        raise OSError(
            f"cannot listen on port {port} of {host}: {exc.strerror or exc};"
            f" pick another port with {port_options}"
        ) from exc
    asked = ("json-errors",) if json_errors else ()
    if settings.workers == 1:
        _alone(settings, sockets[0], asked)
    initialised = supervisor.spawn(settings.model_dump_json().encode(), "initialise", *asked)
    if initialised.wait() != 0:
        return initialised.returncode  # it has said why on stderr
    supervisor.listen(sockets)
    supervisor.start(settings, sockets, layout(settings).size)


def _alone(settings: Settings, sock: socket.socket, asked: tuple[str, ...]) -> NoReturn:
    """One worker: the service in a fresh interpreter on the same PID (``exec``), as the
    supervisor is, so that what the command line loaded (its other commands, the settings'
    documentation, the standalone's modules a relay never uses) does not stay in the
    service's memory for its lifetime."""
    sock.set_inheritable(True)
    plan = supervisor.unnamed_file(settings.model_dump_json().encode())
    sys.stdout.flush()  # exec drops what the buffers still hold
    sys.stderr.flush()
    server = [sys.executable, "-m", "relay.process.server", "alone", str(plan)]
    os.execv(sys.executable, [*server, str(sock.fileno()), *asked])


def _why(workers: int) -> str:
    """What the process may use: the reason for ``auto``'s number, a check of a set one."""
    found = cores.available()
    return str(found) if workers == found.workers(MAX_WORKERS) else f"set; {found}"


def _run(settings: Settings, shared: Shared, sock: socket.socket, name: str) -> None:
    from aiohttp import web

    from relay.app import build_app

    app = build_app(settings, shared)
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_GEN0_THRESHOLD, *gc.get_threshold()[1:])
    try:
        web.run_app(
            app,
            sock=sock,
            shutdown_timeout=settings.shutdown_timeout,
            keepalive_timeout=settings.idle_timeout,
            access_log=None,
            print=lambda _: _listening(settings, shared.worker, name),
        )
    finally:
        if shared.worker == 0:
            _forget_port(settings.data_dir)


def _listening(settings: Settings, worker: int, name: str) -> None:
    """Said once started, so that a start-up error stays the one line on stderr."""
    log.info(
        f"relay{name} listening on {settings.host}:{settings.listen_port}"
        f" ({settings.mode.value} mode)"
    )
    if worker == 0:
        log.info(f"workers: {settings.workers} ({_why(settings.workers)})")
        _note_port(settings)
    _trim()


def _trim() -> None:
    """The heap start-up freed (imports, migrations, first loads) handed back to the system,
    which glibc otherwise keeps for the process's lifetime (measured: 0.6 MB of a relay's
    45 MB; a C library without ``malloc_trim`` keeps it)."""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


LISTENING = "listening"
"""``listening.<pid>`` in ``data_dir``: the port the instance whose worker 0 has that PID
listens on; one file per instance, so that instances sharing a directory never overwrite
each other's."""


def _note_port(settings: Settings) -> None:
    """The port written down for ``relay healthcheck`` (the image's HEALTHCHECK), which does
    not see the command line the service was started with: Edge's ``relay edge -p N`` sets
    the port no variable says. Removed when the instance stops; one left by an instance
    killed is passed over (its PID is gone). A data dir that cannot take it leaves the check
    to a port given to it."""
    path = settings.data_dir / f"{LISTENING}.{os.getpid()}"
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)  # offline mode writes no other
        written = path.with_name(f"{path.name}.tmp")
        written.write_text(f"{settings.listen_port}\n")
        written.replace(path)
    except OSError:
        pass


def _forget_port(data_dir: Path) -> None:
    (data_dir / f"{LISTENING}.{os.getpid()}").unlink(missing_ok=True)


def noted_ports(data_dir: Path) -> dict[int, int]:
    """PID -> port of each instance running from ``data_dir`` that wrote its port down."""
    found: dict[int, int] = {}
    for path in data_dir.glob(f"{LISTENING}.*"):
        pid = path.suffix.removeprefix(".")
        if not pid.isdigit() or not _alive(int(pid)):
            continue
        try:
            found[int(pid)] = int(path.read_text())
        except (OSError, ValueError):
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's: alive
        return True
    return True


def _child_main(argv: list[str]) -> int:
    """``python -m relay.process.server initialise | worker INDEX SUPERVISOR SHARED FD |
    alone PLAN FD``."""
    if argv[0] == "alone":
        with open(int(argv[1]), "rb") as plan:
            settings = Settings.model_validate_json(plan.read())
        errors = logs.LogFormat.JSON if argv[3:] else None
        logs.configure(settings.log_level, settings.log_format)
        alone = Shared.private(layout(settings))
        return _started(
            lambda: _run(settings, alone, socket.socket(fileno=int(argv[2])), ""), errors
        )
    settings = Settings.model_validate_json(sys.stdin.buffer.read())
    if argv[0] == "initialise":
        return _initialise(settings, logs.LogFormat.JSON if argv[1:] else None)
    index, supervisor, memory, fd = map(int, argv[1:])
    _attach_to(supervisor)
    logs.configure(settings.log_level, settings.log_format, worker=index)
    shared = Shared.attach(memory, layout(settings), index)
    return _started(
        lambda: _run(settings, shared, socket.socket(fileno=fd), f" worker {index}"),
        logs.LogFormat.JSON if settings.log_format is logs.LogFormat.JSON else None,
    )


def _initialise(settings: Settings, errors: logs.LogFormat | None) -> int:
    import asyncio

    from relay.app import initialise

    logs.configure(settings.log_level, settings.log_format)
    return _started(lambda: asyncio.run(initialise(settings)), errors)


def _started(work: Callable[[], object], errors: logs.LogFormat | None) -> int:
    """``work`` done; an error an operator can fix is one line on stderr (JSON when JSON
    logs were asked for), as ``relay serve`` says it, and exit 2."""
    from relay.core.errors import StorageError
    from relay.core.keys import InvalidKey
    from relay.settings import SettingsError

    try:
        work()
    except (SettingsError, StorageError, InvalidKey, OSError) as exc:
        logs.error_line(f"relay: error: {exc}", errors)
        return EXIT_CONFIG
    return 0


def _attach_to(supervisor: int) -> None:
    """Signals come from the supervisor only: out of the terminal's process group, so
    Ctrl-C (or ``kill 0``) reaches the supervisor, which stops the workers in order. The
    kernel sends SIGTERM when the supervisor dies, even by SIGKILL, so no orphan keeps
    serving on the port; the check after it covers a supervisor already gone."""
    os.setpgid(0, 0)
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != supervisor:
        raise SystemExit("relay: the supervisor has exited")


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
