"""The CLI as a user or a CI job drives it: real subprocesses, real frameworks."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from fwbench.measure.timing import RunTiming
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING_YAML, fwbench

TINY = ["--batch-size", "2", "--input-size", "32", "--num-classes", "10", "--threads", "1"]


def test_run_prints_the_stored_result_as_json(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    args = ["run", "--framework", "torch", "--model", "resnet18", "--task", "infer", *TINY]
    proc = fwbench(*args, "--max-time", "0.3", "--min-runs", "1", "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    # The plan's cost is said before it is spent (issue 47, item 6).
    assert proc.stderr.startswith("plan: 1 case; estimated "), proc.stderr[:300]
    record = json.loads(proc.stdout)
    assert record["framework"] == "torch" and record["model"] == "resnet18"
    assert record["task"] == "infer" and record["batch_size"] == 2
    assert record["status"] == "ok" and record["error"] is None
    assert record["group_id"] is None  # measured alone: nothing to pair its runs with
    st = record["step_time_s"]
    assert 0 < st["ci_low"] <= st["median"] <= st["ci_high"]
    assert record["throughput"] == pytest.approx(2 / st["median"])
    assert record["environment"]["host"]["cpu_logical_cores"] >= 1
    assert record["environment"]["torch"].startswith("2.")
    # A run's blocks: at least min_samples whatever the machine's speed (a slow one fits
    # fewer than 10 steps of 31 ms in its 0.3 s).
    samples = record["samples"]
    assert len(samples) >= RunTiming().min_samples and all(s > 0 for s in samples)

    listed = fwbench("results", "--db", str(db), "--json")
    assert listed.returncode == 0, listed.stderr
    assert [r["result_id"] for r in json.loads(listed.stdout)] == [record["result_id"]]
    for fmt in ("csv", "parquet", "json"):
        out = tmp_path / f"export.{fmt}"
        assert fwbench("export", "--db", str(db), "-o", str(out)).returncode == 0
        assert out.stat().st_size > 0
    report = tmp_path / "report.md"
    assert fwbench("report", "--db", str(db), "-o", str(report)).returncode == 0
    assert "| resnet18 | infer | 2 | 32px c10 |" in report.read_text()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--framework", "torch", "--model", "alexnet"], "unknown model 'alexnet'"),
        (["run", "--framework", "caffe", "--model", "resnet18"], "unknown framework 'caffe'"),
        (["run", "--framework", "torch", "--model", "vgg16", "--input-size", "8"], "too small"),
        (["sweep", "--preset", "huge"], "unknown preset 'huge'; valid choices: asu-infer, "),
        (["sweep", "--preset", "quick", "--address", "auto"], "--address is for --executor ray"),
        (["sweep", "--preset", "quick", "--executor", "slurm"], "valid choices: local, ray"),
        (["results"], "no results file at"),
    ],
)
def test_bad_input_exits_non_zero_with_one_line_and_writes_nothing(
    tmp_path: Path, args: list[str], expected: str
) -> None:
    db = tmp_path / "sub" / "r.duckdb"
    proc = fwbench(*args, "--db", str(db))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert not db.parent.exists()


def test_broken_yaml_is_rejected_before_anything_runs(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: [resnet18\nbatch_size: 2\n")
    proc = fwbench("sweep", str(bad), "--db", str(tmp_path / "r.duckdb"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {bad}: broken YAML at line 2, column 11: expected ',' or ']', but got ':'"
    ]
    assert not (tmp_path / "r.duckdb").exists()


def test_unreadable_results_file_is_a_clear_error(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    db.write_text("garbage " * 1000)
    proc = fwbench("results", "--db", str(db))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {db} is not a DuckDB database, not an fwbench results")


def test_crash_and_hang_are_recorded_and_the_sweep_goes_on(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: torch\nmodel: [crash, hang, resnet18]\ntask: infer\nbatch_size: 2\n"
        "input_size: 32\nnum_classes: 10\nthreads: 1\ntimeout_s: 10\n" + FAST_TIMING_YAML
    )
    db = tmp_path / "r.duckdb"
    proc = fwbench("sweep", str(spec), "--db", str(db), "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    records = {r["model"]: r for r in json.loads(proc.stdout)}
    assert records["crash"]["status"] == "error"
    assert records["crash"]["error"] == "worker crashed: killed by SIGSEGV"
    assert records["hang"]["status"] == "timeout"
    assert records["hang"]["error"] == "no result after 10 s; worker stopped"
    assert records["resnet18"]["status"] == "ok"
    # The crash and the hang took down their count workers; resnet18 was still counted.
    assert set(records["resnet18"]["parity"]["counts"]) == {"torch", "tensorflow"}
    with ResultStore(db, read_only=True) as store:
        assert [r.status for r in store.results()] == ["error", "timeout", "ok"]


def test_a_variant_that_hangs_leaves_the_others_of_its_round_their_own_time(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    """Variants of one workload are built one after another in a round: a variant that
    hangs is stopped at its own time-out, and the next has all of its own (the round's
    shared deadline was spent by the hang, and the healthy variant was recorded as a
    time-out too)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: [torch, tensorflow]\nmodel: hangs_in_torch\ntask: infer\nbatch_size: 2\n"
        "input_size: 16\nnum_classes: 10\nthreads: 1\ntimeout_s: 20\n" + FAST_TIMING_YAML
    )
    proc = fwbench("sweep", str(spec), "--db", str(tmp_path / "r.duckdb"), "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    records = {r["framework"]: r for r in json.loads(proc.stdout)}
    assert records["torch"]["status"] == "timeout", records["torch"]["error"]
    assert records["tensorflow"]["status"] == "ok", records["tensorflow"]["error"]


def test_killed_sweep_resumes_without_losing_or_duplicating(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: torch\nmodel: resnet18\ntask: infer\nbatch_size: [1, 2, 3]\n"
        "input_size: 32\nnum_classes: 10\nthreads: 1\n" + FAST_TIMING_YAML
    )
    db = tmp_path / "r.duckdb"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "fwbench", "sweep", str(spec), "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # The second case's worker starts only after the first result is committed.
        second = _wait_for_worker(sweep.pid, 2, timeout=300)
        os.kill(sweep.pid, signal.SIGKILL)  # no clean-up at all
        sweep.wait()
        # The worker in flight dies with its launcher (PR_SET_PDEATHSIG).
        psutil.wait_procs([second], timeout=10)
        assert not second.is_running()
    finally:
        if sweep.poll() is None:
            sweep.kill()
    with ResultStore(db, read_only=True) as store:
        assert [r.case.batch_size for r in store.results()] == [1]
    proc = fwbench("sweep", str(spec), "--db", str(db), "--resume")
    assert proc.returncode == 0, proc.stderr
    assert "resuming: 1 of 3 cases already recorded" in proc.stderr
    with ResultStore(db, read_only=True) as store:
        sizes = sorted(r.case.batch_size for r in store.results())
    assert sizes == [1, 2, 3]


def _wait_for_worker(pid: int, nth: int, timeout: float) -> psutil.Process:
    """The nth case worker the sweep started (forked by a fork server, or spawned)."""
    deadline = time.monotonic() + timeout
    parent = psutil.Process(pid)
    seen: list[int] = []
    while time.monotonic() < deadline:
        servers = set()
        for child in parent.children():
            with contextlib.suppress(psutil.NoSuchProcess):
                if "fwbench.launch.forkserver" in " ".join(child.cmdline()):
                    servers.add(child.pid)
        for child in parent.children(recursive=True):
            try:
                cmd = " ".join(child.cmdline())
                # A forked worker is a fork server's child that named itself fwbench-run:
                # the servers' imports start processes of their own (ldconfig, through
                # ctypes), which keep the server's command line until they exec.
                forked = child.ppid() in servers and child.name() == "fwbench-run"
            except psutil.NoSuchProcess:
                continue
            case_worker = "fwbench.launch.worker case:" in cmd  # not a count worker
            if (forked or case_worker) and child.pid not in seen:
                seen.append(child.pid)
                if len(seen) == nth:
                    return child
        time.sleep(0.01)
    raise AssertionError(f"no worker number {nth} within {timeout} s (saw {len(seen)})")


def test_different_work_is_flagged_in_the_result(tmp_path: Path) -> None:
    # torchvision's VGG16 pools adaptively to 7x7; keras.applications flattens what is
    # left, so at 64 px the two classifiers differ by ~94M parameters.
    args = ["run", "--framework", "torch", "--model", "vgg16", "--task", "infer"]
    proc = fwbench(
        *args,
        "--batch-size",
        "1",
        "--input-size",
        "64",
        "--threads",
        "2",
        "--max-time",
        "0.2",
        "--min-runs",
        "1",
        "--max-runs",
        "1",
        "--db",
        str(tmp_path / "r.duckdb"),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["different_work"] is True
    counts = record["parity"]["counts"]
    assert (counts["torch"], counts["tensorflow"]) == (138_357_544, 43_985_704)
    assert any("different work across frameworks" in w for w in record["warnings"])
