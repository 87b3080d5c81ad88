"""The Ray executor on a real Ray instance started on this machine.

The instance stands in for a cluster: the CLI joins it by address, as it would join a
remote one. Its tasks are real Ray worker processes; the kill tests kill one of them
mid-case, as a lost node or an OOM-killed Ray worker would.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.errors import ExecutorError
from fwbench.launch.process import worker_label
from fwbench.launch.ray import HOST_RESOURCE, RayExecutor
from fwbench.store.db import ResultStore
from fwbench.sweep import load_file
from tests.conftest import FAST_TIMING_YAML, fwbench

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def ray_address() -> Iterator[str]:
    # Declared as on every node of a real cluster (`ray start --resources=...`).
    context = ray.init(
        address="local",  # a new instance, whatever $RAY_ADDRESS says
        num_cpus=2,
        include_dashboard=False,
        resources={HOST_RESOURCE: 1},
        log_to_driver=False,
    )
    try:
        yield str(context.address_info["gcs_address"])
    finally:
        ray.shutdown()


def _spec(tmp_path: Path, batch_sizes: list[int]) -> Path:
    spec = tmp_path / "tiny.yaml"
    spec.write_text(
        f"name: tiny\nframework: torch\nmodel: resnet18\ntask: infer\nbatch_size: {batch_sizes}\n"
        "input_size: 32\nnum_classes: 10\nthreads: 1\n" + FAST_TIMING_YAML
    )
    return spec


def _recorded(db: Path) -> Counter[str]:
    with ResultStore(db, read_only=True) as store:
        return Counter(r.case_key for r in store.results())


def _statuses(db: Path) -> dict[int, str]:
    with ResultStore(db, read_only=True) as store:
        return {r.case.batch_size: r.status for r in store.results()}


def _case_worker(marker: str, timeout: float) -> psutil.Process:
    """The fwbench worker measuring the case labelled `marker`: a grandchild of this
    process (this process started Ray's raylet, which starts the Ray workers)."""
    deadline = time.monotonic() + timeout
    me = psutil.Process()
    while time.monotonic() < deadline:
        for child in me.children(recursive=True):
            label = worker_label(child.pid)  # forked workers carry no label in cmdline
            if label is not None and marker in label + " ":
                return child
        time.sleep(0.05)
    raise AssertionError(f"no worker for {marker!r} within {timeout} s")


def _kill_task_of(marker: str) -> psutil.Process:
    """SIGKILL the Ray worker process running the case `marker`; return the case's own
    worker, which must die with it."""
    worker = _case_worker(marker, timeout=120)
    task = worker.parent()
    while (
        task is not None
        and worker_label(task.pid) is None
        and "forkserver" in " ".join(task.cmdline())
    ):
        task = task.parent()  # past the fork server, to the Ray worker running the task
    assert task is not None and worker_label(task.pid) is None
    task.kill()
    return worker


def test_an_unreachable_cluster_is_one_line_in_seconds(tmp_path: Path) -> None:
    spec = _spec(tmp_path, [1])
    started = time.monotonic()
    db = str(tmp_path / "r.duckdb")
    proc = fwbench("sweep", str(spec), "--db", db, "--executor", "ray", "--address", "127.0.0.1:1")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "error: cannot reach the Ray cluster at '127.0.0.1:1': Connection refused"
    )
    assert time.monotonic() - started < 30
    # Nothing was measured: the database the command made is not left behind empty
    # (issue 43, defect 9).
    assert not Path(db).exists() and not Path(db + ".wal").exists()


def test_a_ray_sweep_records_the_same_cases_as_a_local_one(
    tmp_path: Path, ray_address: str
) -> None:
    spec = _spec(tmp_path, [1, 2])
    recorded = {}
    for executor, extra in (("local", []), ("ray", ["--address", ray_address])):
        db = tmp_path / f"{executor}.duckdb"
        started = time.monotonic()
        proc = fwbench("sweep", str(spec), "--db", str(db), "--executor", executor, *extra)
        assert proc.returncode == 0, proc.stderr
        print(f"{executor}: {time.monotonic() - started:.1f} s")
        recorded[executor] = _recorded(db)
        assert set(_statuses(db).values()) == {"ok"}
    assert recorded["ray"] == recorded["local"]
    assert set(recorded["ray"].values()) == {1} and len(recorded["ray"]) == 2


def test_a_killed_ray_task_is_rerun_and_its_case_recorded_once(
    tmp_path: Path, ray_address: str
) -> None:
    spec = _spec(tmp_path, [1, 2])
    db = tmp_path / "r.duckdb"
    args = ["sweep", str(spec), "--db", str(db), "--executor", "ray", "--address", ray_address]
    sweep = subprocess.Popen(
        [sys.executable, "-m", "fwbench", *args, "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        worker = _kill_task_of(" b1 ")
        # The case's worker dies with its Ray task (PR_SET_PDEATHSIG): no orphan measures.
        _, alive = psutil.wait_procs([worker], timeout=10)
        assert not alive
        out, err = sweep.communicate(timeout=300)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    assert sweep.returncode == 0, err
    assert sorted(r["batch_size"] for r in json.loads(out)) == [1, 2]
    counts = _recorded(db)
    assert len(counts) == 2 and set(counts.values()) == {1}
    # Re-run from the start, not recorded as the crash that killing its worker looks like.
    assert _statuses(db) == {1: "ok", 2: "ok"}

    again = fwbench(*args, "--resume")
    assert again.returncode == 0, again.stderr
    assert "resuming: 2 of 2 cases already recorded" in again.stderr
    assert _recorded(db) == counts


def test_a_case_lost_beyond_its_retries_is_not_recorded_and_resume_runs_it(
    tmp_path: Path, ray_address: str
) -> None:
    sweep = load_file(_spec(tmp_path, [1, 2]))
    db = tmp_path / "r.duckdb"
    no_retry = RunOptions(timing=sweep.timing, executor=RayExecutor(max_retries=0))
    killed: list[psutil.Process] = []
    killer = threading.Thread(target=lambda: killed.append(_kill_task_of(" b2 ")), daemon=True)
    killer.start()
    with ResultStore(db) as store:
        stored = []
        with pytest.raises(ExecutorError) as lost:
            stored += run_cases(sweep.cases, store, "lost", no_retry)
        killer.join(timeout=5)
        assert killed, "the case's task was never seen"
        assert str(lost.value).startswith("1 of 2 cases were not recorded (first: ")
        assert "b2" in str(lost.value) and "--resume" in str(lost.value)
        assert [r.case.batch_size for r in store.results()] == [1]
        resumed = list(
            run_cases(
                sweep.cases,
                store,
                "resume",
                RunOptions(timing=sweep.timing, resume=True, executor=RayExecutor()),
            )
        )
        assert [r.case.batch_size for r in resumed] == [2]
    assert _statuses(db) == {1: "ok", 2: "ok"}
