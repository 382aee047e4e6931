"""How many cores this process may use: ``workers = "auto"`` (the default) starts one worker
per core, so a relay given 2 CPUs uses them without a setting, and a sidecar limited to one
CPU (or less) runs one worker.

The cores are the fewer of those in the process's CPU affinity (``taskset``, cpusets) and its
cgroup's CPU quota rounded up (Docker's ``--cpus``, Kubernetes' ``limits.cpu``): cgroup v2
``cpu.max`` or v1 ``cpu.cfs_quota_us``/``cpu.cfs_period_us``, the smallest over the process's
cgroup and its ancestors (a parent's quota limits its children). A file that cannot be read
or parsed sets no limit: the affinity alone decides. Standard library only: the settings read
it, and the supervisor's interpreter stays small.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

PROC_CGROUP = Path("/proc/self/cgroup")
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Cores:
    """What limits the process: cores it may run on, and its cgroup quota in CPUs (if any)."""

    allowed: int
    quota: float | None

    def workers(self, most: int) -> int:
        """One worker per usable core (a quota of 1.5 CPUs: 2), at least 1, at most ``most``."""
        usable = self.allowed if self.quota is None else min(self.allowed, math.ceil(self.quota))
        return max(1, min(usable, most))

    def __str__(self) -> str:
        quota = (
            "no cgroup quota" if self.quota is None else f"cgroup quota {round(self.quota, 2)} CPUs"
        )
        return f"{quota}, {self.allowed} cores allowed"


def available(
    proc_cgroup: Path = PROC_CGROUP, cgroup_root: Path = CGROUP_ROOT, allowed: int | None = None
) -> Cores:
    """The cores of this process; the paths (and ``allowed``) are parameters for tests."""
    if allowed is None:
        allowed = len(os.sched_getaffinity(0))
    return Cores(allowed, _quota(proc_cgroup, cgroup_root))


def _quota(proc_cgroup: Path, root: Path) -> float | None:
    try:
        lines = proc_cgroup.read_text().splitlines()
    except (OSError, ValueError):  # ValueError: bytes that are no UTF-8
        return None
    quotas: list[float] = []
    for line in lines:  # "hierarchy:controllers:path"; v2's controllers are empty
        _, _, rest = line.partition(":")
        controllers, colon, path = rest.partition(":")
        if not colon:
            continue
        if controllers == "":  # v2: one hierarchy, cpu.max in each cgroup
            quotas += _along(root, path, _v2)
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own hierarchy
            for mount in {controllers, "cpu"}:  # "cpu,cpuacct", often also linked as "cpu"
                quotas += _along(root / mount, path, _v1)
    return min(quotas, default=None)


def _along(base: Path, cgroup: str, read: Callable[[Path], float | None]) -> list[float]:
    """The quotas in ``cgroup`` and its ancestors. In a container the path is often the
    host's while the mount is the container's own cgroup: its root then holds the quota."""
    found = []
    for part in (PurePosixPath(cgroup), *PurePosixPath(cgroup).parents):
        quota = read(base / str(part).lstrip("/"))
        if quota is not None:
            found.append(quota)
    return found


def _v2(directory: Path) -> float | None:
    """``cpu.max``: "max 100000" (no limit) or "150000 100000" (1.5 CPUs)."""
    try:
        quota, period = (directory / "cpu.max").read_text().split()
        return None if quota == "max" else _ratio(int(quota), int(period))
    except (OSError, ValueError):
        return None


def _v1(directory: Path) -> float | None:
    """``cpu.cfs_quota_us`` (-1: no limit) over ``cpu.cfs_period_us``."""
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return _ratio(quota, period)


def _ratio(quota: int, period: int) -> float | None:
    """CPUs, or None for no limit: also for a quota too large for a float, as for any
    content a reader cannot use (a start never fails on it)."""
    if quota <= 0 or period <= 0:
        return None
    try:
        return quota / period
    except OverflowError:
        return None
