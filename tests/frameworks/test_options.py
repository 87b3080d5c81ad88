"""A framework's own settings (`--options`) reach the worker and are recorded: TensorFlow's
oneDNN through its environment variable, before TensorFlow loads (the fork servers are
kept per environment), and ONNX Runtime's spinning through its session options."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING


def tiny(framework: str, **kw: object) -> Case:
    fields: dict[str, object] = {
        "framework": framework,
        "model": "resnet18",
        "task": "infer",
        "batch_size": 2,
        "input_size": 32,
        "num_classes": 10,
        "threads": 1,
    }
    return Case.build(**fields | kw)


def test_options_reach_the_worker_and_are_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # TensorFlow's own choice here is off, as on a CPU without AVX512-VNNI or the like.
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    cases = [
        tiny("tensorflow", options="onednn=on"),
        tiny("tensorflow", options="onednn=off"),
        tiny("tensorflow"),
        tiny("onnxruntime", options="spinning=off"),
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        results = {r.case.variant: r for r in run_cases(cases, store, "t", RunOptions(FAST_TIMING))}
    on, off = results["tensorflow/graph/onednn=on"], results["tensorflow/graph/onednn=off"]
    for r in (on, off):
        assert r.status == "ok", r.error
    assert on.environment["onednn_opts_env"] == "1" and on.environment["onednn_enabled"] is True
    assert off.environment["onednn_opts_env"] == "0"
    assert off.environment["onednn_enabled"] is False
    # Off by the user's own choice says nothing; off by TensorFlow's says what it costs.
    assert not any("oneDNN" in w for w in (*on.warnings, *off.warnings))
    plain = results["tensorflow/graph"]
    assert plain.environment["onednn_enabled"] is False
    assert any("`--options onednn=on` measures TensorFlow with it" in w for w in plain.warnings)
    ort = results["onnxruntime/optimized/spinning=off"]
    assert ort.status == "ok", ort.error
    assert ort.settings["intra_op_allow_spinning"] == "0"
