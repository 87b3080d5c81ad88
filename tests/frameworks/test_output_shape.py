"""A model whose logits have another shape than its objective takes is a failed case, in
inference as in training, in every framework (issue 29: inference recorded it ok)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.frameworks.base import OutputShapeError, check_output_shape
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING


def test_a_wrong_output_shape_fails_the_case_in_both_tasks(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    cases = [
        Case.build(
            framework="torch", model=model, task=task, batch_size=2, num_classes=10, threads=1
        )
        for task in ("infer", "train")
        for model in ("wrong_shape", "tiny_cnn")
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        options = RunOptions(timing=FAST_TIMING, count_flops=False)
        results = {(r.case.model, r.case.task): r for r in run_cases(cases, store, "s", options)}
    for task in ("infer", "train"):
        wrong = results[("wrong_shape", task)]
        assert wrong.status == "error", (task, wrong.status)
        assert wrong.error == (
            "OutputShapeError: model wrong_shape returned output of shape (2, 11); its "
            "objective classify takes logits of batch 2 x num_classes 10"
        )
        assert wrong.measurement is None
        assert results[("tiny_cnn", task)].status == "ok"


@pytest.mark.parametrize("task", ["infer", "train"])
def test_every_other_framework_checks_both_tasks_too(
    tmp_path: Path, plugin_env: dict[str, str], task: str
) -> None:
    """Training in a compiled step returns its loss alone: the logits are checked where
    the loss takes them, when the step is traced (TensorFlow's, Keras-on-JAX's and
    Flax's training had recorded the case ok)."""
    modes = {"tensorflow": "graph", "keras-jax": "jit", "keras-torch": "eager", "flax": "jit"}
    cases = [
        Case.build(
            framework=fw, mode=mode, model="wrong_shape", task=task, batch_size=2,
            num_classes=10, threads=1,
        )
        for fw, mode in modes.items()
    ]  # fmt: skip
    with ResultStore(tmp_path / "r.duckdb") as store:
        options = RunOptions(timing=FAST_TIMING, count_flops=False)
        results = {r.case.framework: r for r in run_cases(cases, store, "s", options)}
    for fw in modes:
        assert results[fw].status == "error", (fw, results[fw].status)
        assert (results[fw].error or "").startswith(
            "OutputShapeError: model wrong_shape returned output of shape (2, 11)"
        ), (fw, results[fw].error)


def test_each_objective_names_the_shape_it_takes() -> None:
    lm = Case.build(framework="torch", model="lstm_lm", batch_size=2, seq_len=8)
    check_output_shape(lm, "lm", (2, 8, lm.dim("vocab_size")))
    with pytest.raises(OutputShapeError, match=r"takes logits of batch 2 x seq_len 8 x vocab"):
        check_output_shape(lm, "lm", (2, 8))
    ctc = Case.build(framework="torch", model="deepspeech2", batch_size=2, num_classes=29)
    check_output_shape(ctc, "ctc", (2, 57, 29))  # fewer frames than the input's: fine
    with pytest.raises(OutputShapeError, match=r"batch 2 x frames x num_classes 29"):
        check_output_shape(ctc, "ctc", (2, 57, 30))
