"""`fwbench explain` with the real profilers of both frameworks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwbench.explain.categories import IDLE
from fwbench.store.db import ResultStore
from tests.conftest import fwbench


def _step_ops(framework: str, record: dict) -> dict[str, float]:
    """A record's breakdown, checked: its categories, idle included, add up to the
    profiled step (nothing is lost); the ops' categories (idle left out)."""
    b = record["breakdown"]
    assert b is not None, (framework, record["error"])
    total = sum(b["categories"].values())
    assert abs(total - b["profiled_step_s"]) <= 0.1 * b["profiled_step_s"], framework
    return {k: v for k, v in b["categories"].items() if k != IDLE}


def test_resnet_train_breakdown_in_both_frameworks(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench(
        "explain", "--model", "resnet18", "--task", "train", "--batch-size", "4",
        "--input-size", "64", "--num-classes", "10", "--threads", "1", "--steps", "3",
        "--max-time", "0.5", "--db", str(db), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = {r["framework"]: r for r in json.loads(proc.stdout)}
    assert set(records) == {"torch", "tensorflow"}
    for fw, r in records.items():
        b = r["breakdown"]
        ops = _step_ops(fw, r)
        assert max(ops, key=ops.__getitem__) == "convolution", (fw, b["categories"])
        assert b["categories"].get("optimizer update", 0) > 0
        assert b["unprofiled_step_s"] and b["unprofiled_step_s"] > 0
        assert b["top_ops"] and b["top_ops"][0]["seconds_per_step"] > 0
        assert Path(b["trace"]).exists()  # Chrome trace file / TensorBoard log directory
    report = tmp_path / "report.html"
    assert fwbench("report", str(db), "-o", str(report)).returncode == 0
    assert "Where the step goes" in report.read_text()


def _ops(categories: dict[str, float]) -> float:
    return sum(s for cat, s in categories.items() if cat != IDLE)


def test_generate_splits_the_prefill_from_the_decoding_steps(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    steps, new_tokens = 2, 4
    proc = fwbench(
        "explain", "--framework", "torch", "--framework", "tensorflow", "--framework", "flax",
        "--framework", "keras-jax", "--framework", "keras-torch", "--model", "gpt2_tiny",
        "--task", "generate",
        "--batch-size", "1", "--seq-len", "8", "--task-dims", f"new_tokens={new_tokens}",
        "--threads", "1", "--steps", str(steps), "--max-time", "0.3", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Where the prefill goes" in proc.stdout
    assert "total (decoding step)" in proc.stdout
    assert "Per decoding step" in proc.stderr
    with ResultStore(db, read_only=True) as store:
        results = {r.case.framework: r for r in store.results()}
    assert set(results) == {"torch", "tensorflow", "flax", "keras-jax", "keras-torch"}
    for fw, r in results.items():
        b = r.breakdown
        assert b is not None, (fw, r.error)
        prefill, decode = b.phases["prefill"], b.phases["decode"]
        # One prefill a generation, then a decoding step for each token after the first.
        assert (prefill.occurrences, decode.occurrences) == (steps, steps * (new_tokens - 1))
        assert decode.profiled_s > 0 and _ops(decode.categories) > 0, (fw, decode)
        for phase in (prefill, decode):
            assert sum(phase.categories.values()) == pytest.approx(phase.profiled_s, rel=1e-6)
        # The phases lie inside the window and fill most of it: the rest is the loop
        # between tokens. Every op runs inside one, so their ops' time is the window's.
        window = b.profiled_step_s * steps
        in_phases = sum(p.profiled_s * p.occurrences for p in (prefill, decode))
        assert 0.5 * window < in_phases <= window * (1 + 1e-9), (fw, in_phases, window)
        split = sum(_ops(p.categories) * p.occurrences for p in (prefill, decode))
        assert split == pytest.approx(_ops(b.categories) * steps, rel=0.02), fw


def test_explain_refuses_an_unknown_stored_case(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench("explain", "--case", "feedbeef", "--db", str(db))
    assert proc.returncode == 2
    assert "no results file" in proc.stderr


_PROFILE_UNKEPT = """
from fwbench.case import Case
from fwbench.frameworks.tensorflow import TensorFlowAdapter
case = Case.build(framework="tensorflow", mode="graph", model="resnet18", task="infer",
                  batch_size=2, input_size=32, num_classes=10, device="cpu", threads=1)
adapter = TensorFlowAdapter()
workload = adapter.build(case)
workload.step()
_, events, window, trace = adapter.profile(workload, 2, None)
assert events and trace is None, (len(events), trace)
"""


def test_a_tensorflow_trace_nobody_keeps_leaves_nothing_behind(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", _PROFILE_UNKEPT], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not list(tmp_path.glob("fwbench-tf-trace-*"))


def test_a_flax_step_is_explained_from_its_compiled_program(tmp_path: Path) -> None:
    """JAX's profile names XLA's ops (`ynn_fusion.2`); the compiled program says what
    each holds and which Python functions made it, so a Flax step reads in the same
    categories as the others: its convolutions, its BatchNorm, optax's update."""
    db = tmp_path / "r.duckdb"
    proc = fwbench(
        "explain", "--framework", "flax", "--framework", "flax", "--mode", "jit",
        "--mode", "nnx-jit", "--model", "resnet18", "--task", "train", "--batch-size", "4",
        "--input-size", "64", "--num-classes", "10", "--threads", "1", "--steps", "2",
        "--max-time", "0.5", "--db", str(db), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = {r["mode"]: r for r in json.loads(proc.stdout)}
    assert set(records) == {"jit", "nnx-jit"}
    for mode, r in records.items():
        ops = _step_ops(mode, r)
        b = r["breakdown"]
        assert b["profiler"] == "jax.profiler (XPlane)"
        assert max(ops, key=ops.__getitem__) == "convolution", (mode, b["categories"])
        assert Path(b["trace"]).is_dir()  # jax.profiler's TensorBoard log folder
    # Read through its program (jit's, and the one nnx.jit compiles): the optimizer's and
    # the normalisation's fusions.
    for mode in ("jit", "nnx-jit"):
        found = records[mode]["breakdown"]["categories"]
        assert found.get("optimizer update", 0) > 0, (mode, found)
        assert found.get("normalisation", 0) > 0, (mode, found)


def test_a_flax_generation_is_read_through_its_two_programs_in_both_jitted_modes(
    tmp_path: Path,
) -> None:
    """A generation's prefill and decoding step are two programs (jit_prefill, jit_step)
    under `jit` and under `nnx.jit`: each op is read through the program the profile
    names, so the decoding step's layer norms and matrix products are named, in both."""
    db = tmp_path / "r.duckdb"
    proc = fwbench(
        "explain", "--framework", "flax", "--framework", "flax", "--mode", "jit",
        "--mode", "nnx-jit", "--model", "gpt2_tiny", "--task", "generate",
        "--batch-size", "1", "--seq-len", "8", "--task-dims", "new_tokens=4",
        "--threads", "1", "--steps", "2", "--max-time", "0.3", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    with ResultStore(db, read_only=True) as store:
        results = {r.case.mode: r for r in store.results()}
    assert set(results) == {"jit", "nnx-jit"}
    for mode, r in results.items():
        assert r.breakdown is not None, (mode, r.error)
        for phase in ("prefill", "decode"):
            found = r.breakdown.phases[phase].categories
            assert found.get("normalisation", 0) > 0, (mode, phase, found)
            assert found.get("matmul / GEMM", 0) > 0, (mode, phase, found)


def test_keras_steps_on_jax_and_on_pytorch_are_explained_by_their_backends_profilers(
    tmp_path: Path,
) -> None:
    """Keras on JAX is profiled as Flax is (JAX's profiler, the step's compiled program),
    Keras on PyTorch as PyTorch is (torch.profiler): their convolutions read as such; on
    JAX its BatchNorm and its optimizer's stateless update too, on PyTorch its
    optimizer's foreach update."""
    proc = fwbench(
        "explain", "--framework", "keras-jax", "--framework", "keras-torch", "--model",
        "resnet18", "--task", "train", "--batch-size", "4", "--input-size", "64",
        "--num-classes", "10", "--threads", "1", "--steps", "2", "--max-time", "0.5",
        "--db", str(tmp_path / "r.duckdb"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = {r["framework"]: r for r in json.loads(proc.stdout)}
    assert set(records) == {"keras-jax", "keras-torch"}
    for fw, r in records.items():
        b = r["breakdown"]
        ops = _step_ops(fw, r)
        # Keras on PyTorch spends nearly as long on elementwise ops and copies as on its
        # convolutions (docs/explain.md): which comes first depends on the machine's load.
        assert ops.get("convolution", 0) >= 0.2 * sum(ops.values()), (fw, b["categories"])
        assert Path(b["trace"]).exists()
    jax, torch = (records[fw]["breakdown"] for fw in ("keras-jax", "keras-torch"))
    assert jax["profiler"] == "jax.profiler (XPlane)" and Path(jax["trace"]).is_dir()
    assert jax["categories"].get("normalisation", 0) > 0, jax["categories"]
    assert jax["categories"].get("optimizer update", 0) > 0, jax["categories"]
    assert torch["profiler"] == "torch.profiler"
    assert torch["categories"].get("optimizer update", 0) > 0, torch["categories"]
