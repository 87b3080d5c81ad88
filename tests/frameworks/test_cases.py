"""Train and infer cases in both frameworks, each in a real worker process, stored."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING


def tiny(framework: str, task: str, mode: str = "eager", **kw: object) -> Case:
    fields: dict[str, object] = {
        "framework": framework,
        "model": "resnet18",
        "task": task,
        "mode": mode,
        "batch_size": 2,
        "input_size": 32,
        "num_classes": 10,
        "threads": 2,
    }
    fields.update(kw)
    return Case.build(**fields)


def test_train_and_infer_in_both_frameworks_give_positive_times_and_stored_rows(
    tmp_path: Path,
) -> None:
    cases = [
        tiny("torch", "train"),
        tiny("torch", "infer"),
        tiny("tensorflow", "train", "graph"),
        tiny("tensorflow", "infer", "eager"),
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        invocation_id = store.start_invocation("test", {})
        results = list(run_cases(cases, store, invocation_id, RunOptions(timing=FAST_TIMING)))
        stored = store.results(invocation_id=invocation_id)
    # Interleaved by default: each workload's variants are measured together, so results
    # come back workload by workload, in the order they were stored.
    assert sorted(r.case.key() for r in results) == sorted(c.key() for c in cases)
    assert [r.result_id for r in stored] == [r.result_id for r in results]
    results = sorted(results, key=lambda r: cases.index(r.case))
    for r in results:
        assert r.status == "ok", r.error
        m = r.measurement
        assert m is not None
        assert 0 < m.step_time_s.ci_low <= m.step_time_s.median <= m.step_time_s.ci_high
        assert all(s > 0 for s in m.samples) and len(m.samples) >= FAST_TIMING.run.min_samples
        assert m.build_s > 0 and m.first_step_s > 0
        assert r.throughput and r.throughput > 0
        # Same architecture in both frameworks, checked at the case's size and classes.
        assert r.param_count == 11_181_642
        assert r.parity is not None and r.parity.counts == {
            "torch": 11_181_642,
            "tensorflow": 11_181_642,
        }
        assert r.settings["intra_op_threads"] == 2 and r.settings["inter_op_threads"] == 2
        assert r.settings["env"]["OMP_NUM_THREADS"] == "2"
        assert r.environment
    tf_graph = results[2]
    # Traced once, on the first (untimed) step: no retrace inside the timed region.
    assert tf_graph.settings["tf_function_traces"] == 1
    assert tf_graph.environment["tensorflow"].startswith("2.")
    assert results[0].environment["torch"].startswith("2.")


def test_out_of_memory_is_a_result_and_the_sweep_goes_on(tmp_path: Path) -> None:
    absurd = {"batch_size": 1_000_000, "input_size": 224}
    cases = [
        tiny("torch", "infer", **absurd),
        tiny("tensorflow", "infer", "graph", **absurd),
        tiny("torch", "infer"),
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        results = list(run_cases(cases, store, "run", RunOptions(timing=FAST_TIMING)))
        assert len(store.results()) == 3
    assert [r.status for r in results] == ["oom", "oom", "ok"]
    # Its inputs alone do not fit: made on the host, the same way for every framework.
    assert all("Unable to allocate 561. GiB" in (r.error or "") for r in results[:2])


# An allocation each framework refuses at once (4 TiB), classified by its adapter.
ALLOCATOR_OOM = {
    "torch": "import torch; from fwbench.frameworks.torch import TorchAdapter as A\n"
    "try: torch.empty(1 << 40)\nexcept Exception as e: print(A().is_oom(e), type(e).__name__)",
    "tensorflow": "import tensorflow as tf\n"
    "from fwbench.frameworks.tensorflow import TensorFlowAdapter as A\n"
    "try: tf.zeros((1 << 40,))\nexcept Exception as e: print(A().is_oom(e), type(e).__name__)",
}


def test_each_frameworks_allocator_failure_is_out_of_memory() -> None:
    for framework, code in ALLOCATOR_OOM.items():
        proc = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, (framework, proc.stderr[-2000:])
        assert proc.stdout.split()[0] == "True", (framework, proc.stdout)
