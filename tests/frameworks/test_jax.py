"""JAX, through Keras 3 on its JAX backend: jitted and eager steps, real workers."""

from __future__ import annotations

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
