"""`fwbench serve` as a user drives it: real LoadGen, real frameworks, a tiny model."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from fwbench.store.db import ResultStore
from tests.conftest import fwbench
from tests.e2e.test_cli import _wait_for_worker

GENERATE = ["--model", "gpt2_tiny", "--task", "generate", "--seq-len", "16", "--threads", "1"]


TINY = ["--model", "tiny_cnn", "--num-classes", "10", "--threads", "1", "--batch-size", "2"]


def test_serve_measures_every_scenario_per_framework_and_keeps_loadgens_logs(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    db, report = tmp_path / "r.duckdb", tmp_path / "serve.md"
    args = ["serve", "--framework", "torch", "--framework", "tensorflow", *TINY]
    args += ["--scenario", "single_stream", "--scenario", "server", "--scenario", "offline"]
    args += ["--qps", "20", "--percentile", "0.9", "--duration", "0.3", "--runs", "2"]
    proc = fwbench(*args, "--db", str(db), "--report", str(report), "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert {(r["framework"], r["serving"]["spec"]["scenario"]) for r in records} == {
        (fw, s) for fw in ("torch", "tensorflow") for s in ("single_stream", "server", "offline")
    }
    for r in records:
        s = r["serving"]
        assert r["status"] == "ok", r["error"]
        assert len(s["runs"]) == 2 and all(run["launcher"] for run in s["runs"])
        assert all(run["other_cpu_cores"] is not None for run in s["runs"])
        assert s["overhead_s"] < 1e-3  # LoadGen's own cost, measured on a no-op model
        if s["spec"]["scenario"] != "offline":
            p90 = s["latency_s"]["90.00"]
            assert 0 < p90["ci_low"] <= p90["value"] <= p90["ci_high"] and p90["runs"] == 2
        assert s["samples_per_s"]["value"] > 0
        summaries = list(Path(s["log_dir"]).glob("run*/*/mlperf_log_summary.txt"))
        assert len(summaries) == 2, s["log_dir"]
        assert "MLPerf Results Summary" in summaries[0].read_text()
    # A scenario's two frameworks ran in rounds together: one group each, read paired.
    groups = {(r["serving"]["spec"]["scenario"], r["serving"]["group_id"]) for r in records}
    assert len(groups) == 3 and all(g for _, g in groups), groups
    with ResultStore(db, read_only=True) as store:
        assert len(store.serving()) == 6
    text = report.read_text()
    assert "## Serving: SingleStream latency" in text and "## Serving: Offline throughput" in text
    again = fwbench("report", str(db), "-o", str(tmp_path / "again.html"), env=plugin_env)
    assert again.returncode == 0 and "6 serving points" in again.stderr


def test_a_generation_is_served_as_a_stream_with_loadgens_token_latencies(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    """A prompt per query, its 8 tokens streamed: LoadGen times the first token and each
    later one, in both frameworks, with intervals over runs and verdicts on both."""
    db, report = tmp_path / "r.duckdb", tmp_path / "serve.md"
    args = ["serve", "--framework", "torch", "--framework", "tensorflow", *GENERATE]
    args += ["--task-dims", "new_tokens=8", "--scenario", "single_stream", "--scenario"]
    args += ["server", "--qps", "20", "--percentile", "0.9", "--duration", "0.3", "--runs", "2"]
    proc = fwbench(*args, "--db", str(db), "--report", str(report), "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert len(records) == 4
    for r in records:
        s = r["serving"]
        assert r["status"] == "ok" and s["validity"] == "VALID", (
            r["error"],
            s["invalid_reasons"],
        )
        ttft, tpot = s["ttft_s"]["90.00"], s["tpot_s"]["90.00"]
        assert 0 < ttft["ci_low"] <= ttft["value"] <= ttft["ci_high"] and ttft["runs"] == 2
        assert 0 < tpot["value"] < s["latency_s"]["90.00"]["value"]
        # every query is a batch of one prompt making 8 tokens
        tokens, samples = (
            s["tokens_per_s"]["value"],
            s["samples_per_s"]["value"],
        )
        assert tokens == pytest.approx(8 * samples, rel=0.05)
        for run in s["runs"]:
            (test,) = run["tests"]
            # LoadGen's TPOT: (the query's latency - its first token's) / 7 tokens
            latency = test["mean_latency_s"]
            assert (latency - test["mean_ttft_s"]) / 7 == pytest.approx(
                test["mean_tpot_s"], rel=0.05
            )
        detail = next(Path(s["log_dir"]).glob("run0/*/mlperf_log_detail.txt")).read_text()
        assert '"requested_use_token_latencies", "value": true' in detail
    server = next(r for r in records if r["serving"]["spec"]["scenario"] == "server")
    assert (
        server["serving"]["spec"]["target_qps"] == 20
        and server["serving"]["tokens_per_s"]["value"] > 0
    )
    text = report.read_text()
    assert "## Serving generation: SingleStream token latency" in text
    assert "## Serving generation: token latency at a fixed rate" in text
    assert "## Serving: SingleStream latency" not in text  # no query-latency table


def test_a_ttft_bound_no_rate_can_meet_is_recorded_invalid_with_its_reason(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    db = tmp_path / "r.duckdb"
    args = ["serve", "--framework", "torch", *GENERATE, "--task-dims", "new_tokens=2"]
    args += ["--scenario", "server", "--ttft-bound-ms", "0.001", "--runs", "1"]
    proc = fwbench(*args, "--duration", "0.2", "--db", str(db), "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "ok" and record["serving"]["validity"] == "INVALID"
    assert record["serving"]["invalid_reasons"][0].startswith(
        "the TTFT bound 0.001 ms is below the unloaded time to first token"
    )
    assert record["serving"]["max_qps"] is None


def test_a_bound_no_batch_can_meet_is_recorded_invalid_with_its_reason(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    db = tmp_path / "r.duckdb"
    args = ["serve", "--framework", "torch", *TINY, "--scenario", "server"]
    args += ["--latency-bound-ms", "0.001", "--runs", "1", "--duration", "0.2"]
    proc = fwbench(*args, "--db", str(db), "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    assert "1 run per point" in proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "ok" and record["serving"]["validity"] == "INVALID"
    assert "below the unloaded latency" in record["serving"]["invalid_reasons"][0]
    assert record["serving"]["max_qps"] is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--scenario", "server", "--qps", "0"], "target_qps: Input should be greater than 0"),
        (["--scenario", "nightly"], "scenario: invalid value 'nightly'"),
        (["--latency-bound-ms", "5"], "--latency-bound-ms: applies to the server scenario"),
        (["--qps", "5"], "--qps: applies to the server scenario"),
        (["--runs", "0"], "runs: must be 1 or more"),
        (["--task", "train"], "serving answers queries; set task: infer or generate"),
        (
            [*GENERATE[:4], "--scenario", "server", "--latency-bound-ms", "50"],
            "latency_bound_ms does not apply to task generate; its bounds are ttft_bound_ms",
        ),
        (
            ["--scenario", "server", "--ttft-bound-ms", "50"],
            "ttft_bound_ms does not apply to task infer; its bounds are latency_bound_ms",
        ),
        (["--tpot-bound-ms", "5"], "--tpot-bound-ms: applies to the server scenario"),
        (
            ["--model", "resnet18", "--task", "generate"],
            "task generate does not take resnet18; valid choices: gpt2, gpt2_tiny",
        ),
    ],
)
def test_bad_serving_input_is_one_line_and_writes_nothing(
    tmp_path: Path, extra: list[str], message: str
) -> None:
    db = tmp_path / "r.duckdb"
    args = ["serve", "--framework", "torch", "--model", "resnet18", *extra, "--db", str(db)]
    proc = fwbench(*args)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr
    assert not db.exists()


def test_a_serving_sweep_refuses_what_it_cannot_honour_and_lists_its_points(
    tmp_path: Path,
) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench("sweep", "--preset", "serving", "--budget", "5m", "--db", str(db))
    assert proc.returncode == 2 and "--budget: a serving point makes a fixed number" in proc.stderr
    assert not db.exists()
    listed = fwbench("sweep", "--preset", "serving", "--dry-run")
    assert listed.returncode == 0 and "12 serving points" in listed.stderr
    assert "server max qps p90<=100ms" in listed.stderr


def test_a_serving_run_beside_a_busy_process_is_flagged(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    import subprocess
    import sys

    spin = "import time\nend = time.time() + 120\nwhile time.time() < end: pass\n"
    spinner = subprocess.Popen([sys.executable, "-c", spin])
    try:
        args = ["serve", "--framework", "torch", *TINY, "--scenario", "offline"]
        args += ["--runs", "1", "--duration", "0.5", "--db", str(tmp_path / "r.duckdb")]
        proc = fwbench(*args, "--json", env=plugin_env)
    finally:
        spinner.kill()
        spinner.wait()
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(proc.stdout)
    (run,) = record["serving"]["runs"]
    assert run["other_cpu_cores"] > 0.5  # the spinner's core
    assert any(w.startswith("busy machine: other processes used") for w in record["warnings"])


def test_a_serving_sweep_killed_mid_point_keeps_its_run_and_resumes_it(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    # The same path as a step-time sweep (test_cli's killed sweep): the executor's rounds
    # store each point's runs so far, and --resume measures an unfinished point again.
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: torch\nmodel: tiny_cnn\ntask: infer\nbatch_size: 2\nnum_classes: 10\n"
        "threads: 1\nserve: {scenario: offline, duration_s: 0.3}\n"
        "timing: {min_runs: 2, max_runs: 2, max_warmup_s: 0.3}\n"
    )
    db = tmp_path / "r.duckdb"
    sweep = subprocess.Popen(
        [sys.executable, "-m", "fwbench", "sweep", str(spec), "--db", str(db)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=plugin_env,
    )
    try:
        # The second run's worker starts only after the first run's record is committed.
        second = _wait_for_worker(sweep.pid, 2, timeout=300)
        os.kill(sweep.pid, signal.SIGKILL)
        sweep.wait()
        psutil.wait_procs([second], timeout=10)
    finally:
        if sweep.poll() is None:
            sweep.kill()
    with ResultStore(db, read_only=True) as store:
        (kept,) = store.serving()
    assert kept.status == "ok" and kept.served.unfinished and len(kept.served.runs) == 1
    assert any(w.startswith("unfinished: the command ended after 1 of") for w in kept.warnings)
    proc = fwbench("sweep", str(spec), "--db", str(db), "--resume", "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    assert "resuming" not in proc.stderr  # the unfinished point is not done
    (record,) = json.loads(proc.stdout)
    assert (
        record["status"] == "ok"
        and not record["serving"]["unfinished"]
        and len(record["serving"]["runs"]) == 2
    )
    again = fwbench("sweep", str(spec), "--db", str(db), "--resume", env=plugin_env)
    assert again.returncode == 0 and "resuming: 1 of 1 serving points" in again.stderr


def test_a_flax_model_is_served_as_the_others_are(tmp_path: Path) -> None:
    """Flax's workload behind LoadGen like any framework's: its step per query, its
    figures from LoadGen's log."""
    args = ["serve", "--framework", "flax", "--model", "resnet18", "--input-size", "32"]
    args += ["--num-classes", "10", "--batch-size", "1", "--threads", "1"]
    args += ["--scenario", "single_stream", "--duration", "0.3", "--runs", "1"]
    proc = fwbench(*args, "--db", str(tmp_path / "r.duckdb"), "--json")
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(proc.stdout)
    served = record["serving"]
    assert record["status"] == "ok" and served["validity"] == "VALID", record["error"]
    assert record["framework"] == "flax" and record["mode"] == "jit"
    assert served["latency_s"]["90.00"]["value"] > 0 and len(served["runs"]) == 1
