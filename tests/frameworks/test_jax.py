"""JAX, through Keras 3 on its JAX backend: jitted and eager steps, real workers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING


def test_jax_trains_and_infers_vision_language_and_recurrent_models(tmp_path: Path) -> None:
    small = {"framework": "keras-jax", "batch_size": 2, "threads": 1}
    cases = [
        Case.build(**small, model="resnet18", input_size=32, num_classes=10, task="train"),
        Case.build(**small, model="resnet18", input_size=32, num_classes=10, task="infer"),
        Case.build(
            **small, model="resnet18", input_size=32, task="train", precision="bf16", mode="eager"
        ),
        Case.build(**small, model="lstm_lm", seq_len=8, vocab_size=64, task="train"),
        Case.build(**small, model="bert_base", seq_len=8, vocab_size=64, task="infer"),
        Case.build(**small, model="gpt2_tiny", seq_len=8, vocab_size=64, task="train"),
        Case.build(**small, model="deepspeech2", seq_len=16, freq_bins=32, task="train"),
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        options = RunOptions(timing=FAST_TIMING)
        results = list(run_cases(cases, store, "jax", options))
    for r in results:
        label = r.case.label()
        assert r.status == "ok", (label, r.error)
        assert r.measurement is not None and r.measurement.step_time_s.median > 0
        assert r.environment["jax"] and r.settings["keras_backend"] == "jax", label
        assert r.parity is not None and not r.parity.mismatch, (label, r.parity)
        if r.case.mode == "jit":
            # One compilation, in the first step; none while timed.
            assert r.settings["jit_compilations"] == 1, label
            assert r.measurement.first_step_s > r.measurement.step_time_s.median, label
        # FLOPs are not counted for JAX, and the result says why.
        assert r.work is not None and r.work.flops_per_step is None
    assert results[2].settings["keras_dtype_policy"] == "mixed_bfloat16"


def test_jax_refuses_what_it_does_not_implement() -> None:
    import pytest

    from fwbench.errors import SpecError

    with pytest.raises(SpecError, match="valid choices for keras-jax: fp32, bf16"):
        Case.build(framework="keras-jax", model="resnet18", precision="fp16")
    with pytest.raises(SpecError, match="valid choices for keras-jax: jit, eager"):
        Case.build(framework="keras-jax", model="resnet18", mode="graph")


def test_keras_on_its_torch_backend_runs_the_same_models(tmp_path: Path) -> None:
    small = {"framework": "keras-torch", "batch_size": 2, "threads": 1, "model": "resnet18"}
    cases = [
        Case.build(**small, input_size=32, num_classes=10, task=task) for task in ("train", "infer")
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        results = list(run_cases(cases, store, "kt", RunOptions(timing=FAST_TIMING)))
    for r in results:
        assert r.status == "ok", (r.case.label(), r.error)
        assert r.settings["keras_backend"] == "torch"
        assert r.param_count == 11_181_642  # torchvision's ResNet-18 at 10 classes


def test_a_compiled_program_is_kept_between_commands_and_each_result_says_if_it_hit(
    tmp_path: Path, monkeypatch: object
) -> None:
    """Start-up paid once (issue 47, item 7): the first command compiles and keeps its
    programs in the user's cache, by host and version; a later one loads them, and each
    result records its hits and misses. --no-compile-cache compiles in the run alone."""
    import pytest

    assert isinstance(monkeypatch, pytest.MonkeyPatch)
    monkeypatch.setenv("FWBENCH_CACHE_DIR", str(tmp_path / "cache"))
    case = Case.build(
        framework="keras-jax", model="resnet18", input_size=32, num_classes=10, task="infer",
        batch_size=2, threads=1,
    )  # fmt: skip

    def command(compile_cache: bool) -> dict[str, object]:
        timing = FAST_TIMING.replace(compile_cache=compile_cache)
        with ResultStore(tmp_path / "r.duckdb") as store:
            (found,) = run_cases([case], store, "jax", RunOptions(timing=timing))
        assert found.status == "ok", found.error
        return found.settings

    cold, warm, alone = command(True), command(True), command(False)
    assert cold["compile_cache_scope"] == warm["compile_cache_scope"] == "between commands"
    assert cold["compile_cache_misses"] >= 1 and cold["compile_cache_hits"] == 0
    assert warm["compile_cache_hits"] >= 1 and warm["compile_cache_misses"] == 0
    assert alone["compile_cache_scope"] == "this run only"
    assert alone["compile_cache_misses"] >= 1 and alone["compile_cache_hits"] == 0
    assert list((tmp_path / "cache" / "compile").glob("*/keras-jax-*-cpu"))


INFERENCE_KEEPS_ITS_STATE = """
import importlib
import json
import jax
from fwbench.case import Case
from fwbench.catalog.frameworks import get_framework
from fwbench.frameworks.base import workload_class

found = {}
for framework in ("keras-jax", "flax"):
    case = Case.build(framework=framework, mode="jit", model="resnet18", task="infer",
                      batch_size=1, input_size=32, num_classes=10, threads=1)
    module, _, name = get_framework(framework).adapter_path.partition(":")
    adapter = getattr(importlib.import_module(module), name)()
    adapter.configure("cpu", 1)
    model = adapter.build_model(case.reference, case.dims)
    w = workload_class(framework, case)(model, case, case.model_spec)
    before = [leaf.unsafe_buffer_pointer() for leaf in jax.tree.leaves(w.state)]
    for _ in range(2):
        w.step()
        w.sync()
    after = [leaf.unsafe_buffer_pointer() for leaf in jax.tree.leaves(w.state)]
    found[framework] = {"leaves": len(before), "kept": sum(a == b for a, b in zip(before, after)),
                        "output": list(w.last.shape)}
print(json.dumps(found))
"""


def test_jitted_inference_leaves_the_weights_where_they_are(tmp_path: Path) -> None:
    """Keras on JAX and Flax infer through one jitted function of the weights: returning
    the unchanged weights from it would make XLA write a copy of every one each step
    (measured here: 128 MB of weights, 39 ms a step against 2 ms for the output alone),
    a cost PyTorch's and TensorFlow's inference never pay."""
    proc = subprocess.run(
        [sys.executable, "-c", INFERENCE_KEEPS_ITS_STATE],
        capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    for framework in ("keras-jax", "flax"):
        assert found[framework]["kept"] == found[framework]["leaves"] > 100, found
        assert found[framework]["output"] == [1, 10]
