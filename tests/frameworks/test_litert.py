"""LiteRT for real: the Keras model of a TensorFlow case converted by TensorFlow's
converter and run by LiteRT's interpreter, beside TensorFlow, checked for the same work
(parameters of the source model, FLOPs, outputs within each mode's tolerance), its
quantised modes marked in verdicts, and refused up front for what it cannot do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.report.summary import summarise, verdict_notes
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING, fwbench

pytest.importorskip("ai_edge_litert")

TINY = ["--batch-size", "2", "--input-size", "32", "--num-classes", "10", "--threads", "2"]
FAST = ["--max-time", "0.3", "--min-runs", "1", "--max-runs", "1"]


def test_resnet18_runs_beside_tensorflow_with_the_same_work(tmp_path: Path) -> None:
    proc = fwbench(
        "run", "--framework", "tensorflow", "--framework", "litert", "--model", "resnet18",
        "--task", "infer", *TINY, *FAST, "--db", str(tmp_path / "r.duckdb"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = {r["framework"]: r for r in json.loads(proc.stdout)}
    tf, lite = records["tensorflow"], records["litert"]
    assert tf["status"] == "ok" and lite["status"] == "ok", lite["error"]
    assert lite["mode"] == "fp32"  # its default
    # Parameters are the source Keras model's, as TensorFlow counts them.
    assert lite["param_count"] == tf["param_count"] == 11_181_642
    assert lite["parity"]["counts"] == {"litert": 11_181_642, "tensorflow": 11_181_642}
    assert not lite["different_work"]
    s = lite["settings"]
    assert s["output_check"] == "agrees" and s["output_max_rel_error"] < s["output_tolerance"]
    assert s["output_tolerance"] == 1e-3
    assert s["converter"].startswith('keras.Model.export(format="tf_saved_model")')
    assert s["quantization"].startswith("none")
    assert s["num_threads"] == 2 and s["layout"] == "channels_last (NHWC)"
    # Conversion is timed apart from the steady state.
    for key in ("export_s", "convert_s", "interpreter_s", "first_invoke_s"):
        assert s[key] > 0, key
    assert lite["build_s"] > s["export_s"] + s["convert_s"]
    # The converted file: BatchNorm folded into the 20 convolutions, all run by XNNPACK.
    assert s["model_bytes"] > 4 * 11_000_000
    assert s["model_ops"] == 36 and s["model_op_types"].startswith("CONV_2D 20")
    assert s["delegate"].startswith("XNNPACK")
    assert s["delegated_ops"] == "36 of 36 operators in 1 partition(s)"
    assert lite["work"]["flops_per_step"] == pytest.approx(tf["work"]["flops_per_step"])
    assert lite["environment"]["ai_edge_litert"]


def test_quantised_modes_are_checked_within_their_tolerance_and_marked(tmp_path: Path) -> None:
    """int8 (dynamic range) and fp16 weights: smaller files, outputs checked within a
    recorded looser tolerance, and a verdict against fp32 that says so."""
    workload = {
        "model": "resnet18", "task": "infer", "batch_size": 2, "input_size": 32,
        "num_classes": 10, "threads": 2,
    }  # fmt: skip
    cases = [
        Case.build(framework="litert", mode=mode, **workload) for mode in ("fp32", "int8", "fp16")
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        results = list(run_cases(cases, store, "litert", RunOptions(timing=FAST_TIMING)))
    found = {r.case.mode: r for r in results}
    for mode, r in found.items():
        assert r.status == "ok", (mode, r.error)
        assert r.settings["output_check"] == "agrees", (mode, r.settings)
        assert not r.different_work
    sizes = {mode: found[mode].settings["model_bytes"] for mode in found}
    assert sizes["int8"] < sizes["fp16"] < sizes["fp32"]
    assert sizes["int8"] < sizes["fp32"] / 3  # int8 weights: a quarter, plus scales
    assert found["int8"].settings["output_tolerance"] == 0.1
    assert found["fp16"].settings["output_tolerance"] == 0.01
    assert found["int8"].settings["quantization"].startswith("dynamic range: int8 weights")
    assert "DEQUANTIZE" in found["fp16"].settings["model_op_types"]
    # One row, three variants, each in its own numerics: the verdict between the fastest
    # two says which, and the mark is explained once under the table.
    [row] = summarise(results)[1]
    verdict = row.comparison()
    assert verdict is not None
    faster, slower = row.ok[verdict.faster].case, row.ok[verdict.slower].case
    assert f"[{faster.numerics} vs {slower.numerics}]" in row.verdict()
    assert any("Other arithmetic" in note for note in verdict_notes([row]))


def test_training_is_refused_with_the_reason(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    base = ["run", "--framework", "litert", "--model", "resnet18", *TINY, "--db", str(db)]
    for extra, reason in (
        (["--task", "train"], "cannot train: it is an inference runtime"),
        (["--task", "infer", "--layout", "channels_first"], "runs channels_last only"),
        (["--task", "infer", "--precision", "fp16"], "valid choices for litert: fp32"),
        (["--task", "infer", "--mode", "int4"], "fp32, int8, fp16"),
    ):
        proc = fwbench(*base, *extra)
        assert proc.returncode == 2, proc.stderr
        assert reason in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not db.exists()


def test_a_model_the_converter_cannot_handle_is_recorded_unsupported(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    proc = fwbench(
        "run", "--framework", "litert", "--model", "bessel_cnn", "--task", "infer",
        "--batch-size", "2", "--threads", "2", *FAST, "--db", str(tmp_path / "r.duckdb"),
        "--json", env=plugin_env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["status"] == "unsupported"
    error = record["error"]
    assert "has no LiteRT builtin op for tf.BesselI0e" in error, error
    assert "\n" not in error and "this CPU" not in error


def test_it_serves_under_loadgen_like_any_framework(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    pytest.importorskip("mlperf_loadgen")
    proc = fwbench(
        "serve", "--framework", "litert", "--mode", "int8", "--model", "tiny_cnn",
        "--batch-size", "2", "--threads", "2", "--scenario", "single_stream", "--runs", "1",
        "--duration", "0.3", "--db", str(tmp_path / "r.duckdb"), "--json", env=plugin_env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [record] = json.loads(proc.stdout)  # serve prints a list, of one point here
    assert record["status"] == "ok" and record["serving"]["validity"] == "VALID", record["error"]
    assert record["settings"]["output_check"] == "agrees"
    assert record["settings"]["convert_s"] > 0
