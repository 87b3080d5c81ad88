"""Execution modes beyond eager: TorchScript (trace) and TensorFlow XLA, real frameworks."""

from __future__ import annotations

import json
from pathlib import Path

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.result import Result
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING, fwbench


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
            threads=1,
        )
        for fw, mode in (("torch", "script"), ("tensorflow", "xla"))
        for task in ("train", "infer")
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        results = list(run_cases(cases, store, "modes", RunOptions(timing=FAST_TIMING)))
    results.sort(key=lambda r: cases.index(r.case))  # interleaved: back workload by workload
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


def _combinations() -> list[Case]:
    """Every mode x precision valid on CPU, per framework; layouts alternate so both
    appear in every mode. Compiled modes run inference (their compile is the slow part),
    the others train."""
    cases = []
    for fw, modes in (
        ("torch", ("eager", "compile", "compile-max-autotune", "script")),
        ("tensorflow", ("eager", "graph", "xla")),
    ):
        for i, mode in enumerate(modes):
            for j, precision in enumerate(("fp32", "bf16", "fp16")):
                if mode == "script" and precision != "fp32":
                    continue  # rejected: see test_invalid_combinations_are_refused
                cases.append(
                    Case.build(
                        framework=fw,
                        model="tiny_cnn",
                        task="infer" if mode.startswith("compile") else "train",
                        mode=mode,
                        precision=precision,
                        layout=("channels_first", "channels_last")[(i + j) % 2],
                        batch_size=2,
                        num_classes=10,
                        threads=1,
                    )
                )
    return cases


def test_every_mode_precision_and_layout_valid_on_cpu_runs(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    cases = _combinations()
    assert {c.layout or "native" for c in cases} == {"channels_first", "channels_last", "native"}
    with ResultStore(tmp_path / "r.duckdb") as store:
        options = RunOptions(timing=FAST_TIMING, count_flops=False)
        results = list(run_cases(cases, store, "combos", options))
    assert len(results) == len(cases)
    results = [r for r in results if not _unsupported_here(r)]
    for r in results:
        label = r.case.label()
        assert r.status == "ok", (label, r.error)
        assert r.measurement is not None
        assert r.settings["precision"] == (r.case.precision or "fp32"), label
        native = "channels_first" if r.case.framework == "torch" else "channels_last"
        assert r.settings["layout"].startswith(r.case.layout or native), label
        if r.case.mode.startswith("compile"):
            # Compilation lands in the first step and is counted; none while timed.
            assert r.measurement.first_step_s > 3 * r.measurement.step_time_s.median, label
            assert r.settings["compiles_after_timing"] == r.settings["compiles_after_warmup"]
            assert not any("recompiled" in w for w in r.warnings), label
    mixed = [r for r in results if r.case.precision == "fp16" and r.case.task == "train"]
    assert mixed and all(
        r.settings.get("grad_scaler") or r.settings.get("loss_scaling") for r in mixed
    )


def _unsupported_here(r: Result) -> bool:
    """TensorFlow's convolutions in NCHW (channels_first) depend on the machine: its own CPU
    kernels take NHWC only, so NCHW runs through oneDNN, which TensorFlow turns on by
    default only on some CPUs, and in bf16 / fp16 only where oneDNN has kernels for that
    type on this CPU. XLA compiles its own convolution: it runs everywhere. Where the
    kernels are missing the result must say `unsupported`, with TensorFlow's reason and
    what about this machine decides it, never `error`; where they exist it must run.
    Whether oneDNN was on, and for which types, is what the run recorded in TensorFlow's
    own words (the off path is checked against TF_ENABLE_ONEDNN_OPTS=0 in
    test_tensorflow_nchw_without_onednn_is_unsupported)."""
    c = r.case
    if c.framework != "tensorflow" or c.layout != "channels_first" or c.mode == "xla":
        return False
    onednn = r.environment.get("onednn_enabled")
    kernels = r.environment.get("onednn_precisions")
    assert onednn is not None and kernels is not None, (c.label(), r.status, r.error)
    precision = c.precision or "fp32"
    if onednn and precision in kernels:
        return False  # this machine has the kernels: the case must run
    assert r.status == "unsupported", (c.label(), r.status, r.error, onednn, kernels)
    assert "NHWC" in str(r.error)  # "only supports NHWC", or "the NHWC tensor format"
    if onednn:
        assert f"TensorFlow's oneDNN: on, kernels for {', '.join(kernels)}" in str(r.error)
    else:
        assert "TensorFlow's oneDNN: off (TF_ENABLE_ONEDNN_OPTS=1 turns it on" in str(r.error)
    assert "Conv2D" in r.settings["error_traceback"]
    return True


def test_tensorflow_nchw_without_onednn_is_unsupported(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    """With oneDNN off (as TensorFlow leaves it on CPUs without AVX512-VNNI, AVX512-BF16,
    AVX-VNNI or AMX), a channels_first convolution has no CPU kernel in any precision."""
    proc = fwbench(
        "run", "--framework", "tensorflow", "--mode", "eager", "--model", "tiny_cnn",
        "--layout", "channels_first", "--task", "train", "--batch-size", "2",
        "--num-classes", "10", "--threads", "1", "--max-time", "0.3", "--min-runs", "1",
        "--max-runs", "1", "--db", str(tmp_path / "r.duckdb"), "--json",
        env=plugin_env | {"TF_ENABLE_ONEDNN_OPTS": "0"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["environment"]["onednn_enabled"] is False
    assert record["environment"]["onednn_opts_env"] == "0"
    assert record["status"] == "unsupported", record["error"]
    assert "only supports the NHWC tensor format on the CPU" in record["error"]
    assert "TensorFlow's oneDNN: off (TF_ENABLE_ONEDNN_OPTS=1 turns it on" in record["error"]
    assert "fp32" in record["environment"]["onednn_precisions"]


def test_invalid_combinations_are_refused_with_their_reason() -> None:
    import pytest

    from fwbench.errors import SpecError

    base = {"model": "resnet18", "threads": 1}
    for fields, reason in (
        ({"framework": "torch", "mode": "compile-reduce-overhead"}, "CUDA graphs"),
        ({"framework": "torch", "precision": "tf32"}, "cuda only"),
        ({"framework": "tensorflow", "autotune": True}, "cuda only"),
        ({"framework": "torch", "mode": "script", "precision": "bf16"}, "TorchScript"),
        ({"framework": "torch", "model": "bert_base", "layout": "channels_last"}, "image"),
        ({"framework": "torch", "precision": "fp8"}, "valid choices"),
    ):
        with pytest.raises(SpecError, match=reason):
            Case.build(**{**base, **fields})
    # The framework's defaults, given explicitly, name the same case as left out.
    assert Case.build(**base, framework="torch", precision="fp32", layout="channels_first") == (
        Case.build(**base, framework="torch")
    )


def test_tensorflow_xla_keeps_its_programs_for_the_next_command(
    tmp_path: Path, monkeypatch: object
) -> None:
    """TensorFlow's XLA mode compiles into XLA's persistent cache in the user's cache: the
    first command writes its programs (its misses), the next writes none, loading them;
    a damaged program in it costs one run compiled again, not a failed case."""
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("FWBENCH_CACHE_DIR", str(tmp_path / "cache"))
    case = Case.build(
        framework="tensorflow", mode="xla", model="resnet18", input_size=32, num_classes=10,
        task="infer", batch_size=2, threads=1,
    )  # fmt: skip

    def command() -> dict[str, object]:
        timing = FAST_TIMING.replace(min_runs=1, max_runs=1)
        with ResultStore(tmp_path / "r.duckdb") as store:
            (found,) = run_cases([case], store, "xla", RunOptions(timing=timing))
        assert found.status == "ok", found.error
        return found.settings | {"warnings": found.warnings}

    cold, warm = command(), command()
    assert str(cold["compile_cache"]).startswith("XLA executables (TensorFlow's")
    assert cold["compile_cache_scope"] == "between commands"
    assert isinstance(cold["compile_cache_misses"], int) and cold["compile_cache_misses"] >= 1
    assert warm["compile_cache_misses"] == 0
    (program,) = (tmp_path / "cache" / "compile").glob("*/tensorflow-*-cpu/tf-xla/*.pb")

    # A damaged cache (a disk filled mid-write, a killed command) failed every later
    # compiled case: the run is made again compiling afresh, and the cache removed.
    program.write_bytes(program.read_bytes()[:100])
    damaged = command()
    (said,) = [w for w in damaged["warnings"] if "compile cache" in w]  # type: ignore[attr-defined]
    assert said.startswith(f"the compile cache {program.parent.parent} failed this case (")
    assert said.endswith("it was removed and the programs compiled afresh")
    assert damaged["compile_cache_scope"] == "this run only"
    assert not program.parent.exists()
    assert command()["compile_cache_misses"] == 1  # the next command fills it again
