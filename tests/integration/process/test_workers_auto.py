"""``workers = auto`` (the default): one worker per core the process may use, the cgroup's
CPU quota included. The cgroup files are real files in a directory laid out as the kernel's."""

from __future__ import annotations

from pathlib import Path

import pytest
from relaykit import workers
from service import running, wait_until

from relay.settings import SettingsError, cores, load_settings
from relay.settings.fields import MAX_WORKERS

V2 = "0::/kubepods/pod1/relay\n"
V1_ROOT = "cpu,cpuacct"
V1_PERIOD = {f"{V1_ROOT}/cpu.cfs_period_us": "100000\n"}
V1 = "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n0::/\n"


def layout(tmp_path: Path, proc_cgroup: str | None, files: dict[str, str]) -> cores.Cores:
    """``available`` on a /proc/self/cgroup of ``proc_cgroup`` (None: no such file) and the
    ``files`` under /sys/fs/cgroup, with 4 cores allowed unless the quota says fewer."""
    proc = tmp_path / "cgroup"
    if proc_cgroup is not None:
        proc.write_text(proc_cgroup, errors="surrogateescape")
    root = tmp_path / "sys-fs-cgroup"
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, errors="surrogateescape")
    return cores.available(proc, root, allowed=4)


@pytest.mark.parametrize(
    ("proc_cgroup", "files", "expected", "said"),
    [
        # no limit: every allowed core
        (V2, {"kubepods/pod1/relay/cpu.max": "max 100000\n"}, 4, "no cgroup quota, 4 cores"),
        # a quota of 1.5 CPUs gets 2 workers, of 0.5 CPUs (limits.cpu: 500m) one
        (V2, {"kubepods/pod1/relay/cpu.max": "150000 100000\n"}, 2, "cgroup quota 1.5 CPUs"),
        (V2, {"kubepods/pod1/relay/cpu.max": "50000 100000\n"}, 1, "cgroup quota 0.5 CPUs"),
        # Kubernetes' limits.cpu: 1 on the pod, none on the container: the ancestor's counts
        (
            V2,
            {"kubepods/pod1/cpu.max": "100000 100000", "kubepods/pod1/relay/cpu.max": "max 1"},
            1,
            "cgroup quota 1.0 CPUs",
        ),
        # the affinity (4 cores) is smaller than the quota (8 CPUs)
        (V2, {"kubepods/pod1/relay/cpu.max": "800000 100000\n"}, 4, "cgroup quota 8.0 CPUs"),
        # cgroup v1, and a container whose mount is its own cgroup while the path is the host's
        (
            V1,
            {
                "cpu,cpuacct/cpu.cfs_quota_us": "200000\n",
                "cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            },
            2,
            "cgroup quota 2.0 CPUs",
        ),
        (
            V1,
            {
                "cpu,cpuacct/docker/abc/cpu.cfs_quota_us": "-1",
                "cpu,cpuacct/docker/abc/cpu.cfs_period_us": "100000",
            },
            4,
            "no cgroup quota",
        ),
        # unreadable or unparsable: no limit known, the affinity decides
        (None, {}, 4, "no cgroup quota"),
        (V2, {}, 4, "no cgroup quota"),
        (V2, {"kubepods/pod1/relay/cpu.max": "lots\n"}, 4, "no cgroup quota"),
        (V1, {"cpu,cpuacct/cpu.cfs_quota_us": "50000"}, 4, "no cgroup quota"),
        # odd contents: a quota too large for a float, bytes that are no text, a period of 0
        (V2, {"kubepods/pod1/relay/cpu.max": f"1{'0' * 400} 100000"}, 4, "no cgroup quota"),
        (V2, {"kubepods/pod1/relay/cpu.max": "\udcff\udcfe"}, 4, "no cgroup quota"),
        (V2, {"kubepods/pod1/relay/cpu.max": "100000 0"}, 4, "no cgroup quota"),
        (
            V1,
            {
                "cpu,cpuacct/cpu.cfs_quota_us": "9" * 400,
                "cpu,cpuacct/cpu.cfs_period_us": "100000",
            },
            4,
            "no cgroup quota",
        ),
        ("\udcff\udcfe0::/\n", {"cpu.max": "100000 100000"}, 4, "no cgroup quota"),
    ],
)
def test_auto_is_one_worker_per_usable_core(
    tmp_path: Path, proc_cgroup: str | None, files: dict[str, str], expected: int, said: str
) -> None:
    found = layout(tmp_path, proc_cgroup, files)
    assert found.workers(MAX_WORKERS) == expected
    assert str(found).startswith(said)
    assert str(found).endswith(", 4 cores allowed")


def test_auto_stays_within_the_settings_bounds() -> None:
    assert cores.Cores(allowed=200, quota=None).workers(MAX_WORKERS) == MAX_WORKERS
    assert cores.Cores(allowed=1, quota=0.01).workers(MAX_WORKERS) == 1


def test_auto_is_the_default_and_a_number_still_wins() -> None:
    here = cores.available().workers(MAX_WORKERS)
    assert load_settings().workers == here
    assert load_settings({"workers": "auto"}).workers == here
    assert load_settings({"workers": "3"}).workers == 3
    for odd in ("many", "-1", "", "1.5"):  # -1 is "all cores" to some tools: not here
        with pytest.raises(SettingsError, match=f"workers: must be 1 to {MAX_WORKERS}, or auto"):
            load_settings({"workers": odd})


@pytest.mark.process
def test_serve_starts_auto_workers_and_says_why(tmp_path: Path) -> None:
    found = cores.available()
    expected = found.workers(MAX_WORKERS)
    with running(tmp_path, env={"RELAY_WORKERS": "auto"}) as service:
        # one worker runs in the process started; more are a supervisor's children
        assert len(workers(service)) == (0 if expected == 1 else expected)
        said = f"workers: {expected} ({found})"  # by worker 0 once it listens, maybe last
        wait_until(lambda: said in service.logs(), "the workers' number said")
