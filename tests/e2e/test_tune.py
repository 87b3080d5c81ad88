"""`fwbench tune`: a real (small) search in both frameworks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwbench.case import default_threads
from tests.conftest import fwbench


def test_tune_reports_each_frameworks_best_and_both_verdicts(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    args = ["tune", "tiny_cnn", "--batch-size", "4", "--num-classes", "10", "--threads", "1"]
    args += ["--mode", "eager", "--mode", "graph", "--precision", "fp32"]
    args += ["--precision", "bf16", "--max-time", "0.3", "--db", str(tmp_path / "t.duckdb")]
    # TensorFlow's own setting, tried on every TensorFlow candidate (torch has none).
    args += ["--options", "onednn=off"]
    proc = fwbench(*args, "--json", env=plugin_env)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    by_fw = {f["framework"]: f for f in found["frameworks"]}
    assert set(by_fw) == {"torch", "tensorflow"}
    # torch: eager x {fp32, bf16} x {NCHW, NHWC}; tensorflow: eager and graph x the same,
    # all with onednn=off; all at the one thread --threads gives (a searched axis). And
    # each framework's default apart (the machine's threads; TensorFlow's: graph, no
    # options, TensorFlow decides).
    apart = int(default_threads() != 1)
    assert by_fw["torch"]["tried"] == 4 + apart and by_fw["tensorflow"]["tried"] == 9
    for f in by_fw.values():
        best, default = f["best"], f["default"]
        assert best["status"] == "ok" and default["status"] == "ok"
        # The best and its speed-up are what the verdict reads (each run's p25), the
        # speed-up the verdict's own ratio.
        assert f["speedup"] >= 1
        verdict = f["best_vs_default"]
        if verdict is not None:
            assert verdict["faster"].startswith(best["framework"])
            assert f["speedup"] == pytest.approx(verdict["ratio"])
        else:
            assert best["result_id"] == default["result_id"] and f["speedup"] == 1
    assert by_fw["tensorflow"]["default"]["mode"] == "graph"  # Keras' usual way
    assert by_fw["tensorflow"]["default"]["options"] is None  # TensorFlow decides
    # Every candidate but the default turned oneDNN off (tried == 9 above); the default
    # may still be the fastest on a busy machine.
    tf_best = by_fw["tensorflow"]["best"]
    if tf_best["result_id"] != by_fw["tensorflow"]["default"]["result_id"]:
        assert tf_best["options"] == "onednn=off"
        assert tf_best["environment"]["onednn_enabled"] is False
    for key in ("best_vs_best", "default_vs_default"):
        verdict = found[key]
        assert verdict["ratio"] >= 1 and verdict["faster"] != verdict["slower"], verdict
