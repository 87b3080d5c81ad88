"""Data-parallel training for real: DDP (gloo, 2 processes by torchrun) and
MultiWorkerMirroredStrategy (2 workers on localhost), on the CPU, end to end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import psutil
import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING, FAST_TIMING_YAML, fwbench

TINY = ["--model", "resnet18", "--input-size", "32", "--batch-size", "2", "--num-classes", "10"]


def test_ddp_and_multiworker_on_two_cpu_workers(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    out = fwbench(
        "run", "--framework", "torch", "--framework", "tensorflow",
        "--mode", "eager", "--mode", "graph", "--strategy", "ddp", "--strategy", "multiworker",
        "--world-size", "2", "--threads", "1", *TINY, "--max-time", "0.3", "--target-ci", "0.5",
        "--min-runs", "1", "--db", str(db), "--json",
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    records = {r["strategy"]: r for r in json.loads(out.stdout)}
    for strategy, backend in (("ddp", "gloo"), ("multiworker", "RING")):
        r = records[strategy]
        assert r["status"] == "ok", (r["error"], r["settings"].get("worker_log_tail"))
        assert (r["world_size"], r["batch_size"], r["global_batch_size"]) == (2, 2, 4)
        assert r["throughput"] > 0
        assert r["throughput"] * r["step_time_s"]["median"] == pytest.approx(4)  # global
        d = r["distributed"]
        assert (d["processes"], d["replicas"], d["threads_per_process"]) == (2, 2, 1)
        assert backend in d["backend"]
        assert len(d["host_peak_bytes_per_rank"]) == 2
    # DDP's gloo all-reduce shows in torch.profiler; TensorFlow's collective op too.
    assert records["ddp"]["distributed"]["communication"]["in_flight_s"] > 0
    assert "gloo:all_reduce" in records["ddp"]["distributed"]["communication"]["ops"]
    # TensorFlow's all-reduce of the gradients (CollectiveReduceV2) is found too.
    multiworker = records["multiworker"]["distributed"]["communication"]
    assert multiworker["in_flight_s"] > 0, multiworker
    assert records["ddp"]["distributed"]["launcher"].startswith("torchrun")
    report = tmp_path / "report.md"
    assert fwbench("report", str(db), "-o", str(report)).returncode == 0
    text = report.read_text()
    assert "## Data-parallel scaling" in text and "scaling.png" in text


def test_dp_is_refused_on_the_cpu_and_mirrored_runs_on_logical_cpus(tmp_path: Path) -> None:
    tiny = {"model": "resnet18", "world_size": 2, "threads": 1, "input_size": 32, "batch_size": 2}
    cases = [
        Case.build(framework="torch", strategy="dp", **tiny),
        Case.build(framework="tensorflow", mode="graph", strategy="mirrored", **tiny),
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        invocation_id = store.start_invocation("test", {})
        results = list(run_cases(cases, store, invocation_id, RunOptions(timing=FAST_TIMING)))
    dp, mirrored = results
    assert dp.status == "unsupported"
    assert dp.error is not None and "DataParallel needs 2 CUDA device" in dp.error
    assert dp.case.global_batch_size == 4 and dp.measurement is None
    # MirroredStrategy splits the CPU into logical devices, one per replica, and says so.
    assert mirrored.status == "ok", mirrored.error
    assert mirrored.distributed is not None and mirrored.distributed.replicas == 2
    info = mirrored.distributed.model_dump()
    assert info["devices"] == [
        "/job:localhost/replica:0/task:0/device:CPU:0",
        "/job:localhost/replica:0/task:0/device:CPU:1",
    ]
    assert "share the process's threads and cores" in info["logical_devices"]
    assert mirrored.case.global_batch_size == 4


def test_a_hanging_rank_times_out_and_every_rank_is_stopped(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    yaml = tmp_path / "hang.yaml"
    yaml.write_text(
        "model: hang\nframework: torch\nstrategy: ddp\nworld_size: 2\nthreads: 1\n"
        "timeout_s: 6\n" + FAST_TIMING_YAML
    )
    out = fwbench("sweep", str(yaml), "--db", str(tmp_path / "r.duckdb"), env=plugin_env)
    assert out.returncode == 0, out.stderr
    with ResultStore(tmp_path / "r.duckdb", read_only=True) as store:
        (result,) = store.results()
    assert result.status == "timeout"
    assert result.error is not None and "2 rank(s) stopped" in result.error
    leftovers = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if p.pid != os.getpid()
        and "fwbench.distributed.worker" in " ".join(p.info["cmdline"] or [])
        and "hang" in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []
