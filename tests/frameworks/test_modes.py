"""Execution modes beyond eager: TorchScript (trace) and TensorFlow XLA, real frameworks."""

from __future__ import annotations

from pathlib import Path

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING


def test_torchscript_and_xla_run_train_and_infer_with_their_start_up_apart(
    tmp_path: Path,
) -> None:
    cases = [
        Case.build(
            framework=fw,
            model="resnet18",
            task=task,
            mode=mode,
            batch_size=2,
            input_size=32,
            num_classes=10,
            threads=2,
        )
        for fw, mode in (("torch", "script"), ("tensorflow", "xla"))
        for task in ("train", "infer")
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        results = list(run_cases(cases, store, "modes", RunOptions(timing=FAST_TIMING)))
    for r in results:
        assert r.status == "ok", (r.case.label(), r.error)
        assert r.measurement is not None
        # Trace / compile cost is reported apart and exceeds a steady step.
        if r.case.framework == "torch":
            assert r.settings["torchscript_trace_s"] > 0
        else:
            assert r.measurement.first_step_s > r.measurement.step_time_s.median
            assert r.settings["tf_function_traces"] == 1  # no retrace while timed
        assert r.work is not None and r.work.flops_per_step, r.work
    torch_train, _, tf_train, _ = results
    assert torch_train.work and tf_train.work
    assert torch_train.work.flops_per_step == tf_train.work.flops_per_step
