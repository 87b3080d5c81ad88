"""`fwbench explain` with the real profilers of both frameworks."""

from __future__ import annotations

import json
from pathlib import Path

from fwbench.explain.categories import IDLE
from tests.conftest import fwbench


def test_resnet_train_breakdown_in_both_frameworks(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench(
        "explain", "--model", "resnet18", "--task", "train", "--batch-size", "4",
        "--input-size", "64", "--num-classes", "10", "--threads", "2", "--steps", "3",
        "--max-time", "0.5", "--db", str(db), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = {r["framework"]: r for r in json.loads(proc.stdout)}
    assert set(records) == {"torch", "tensorflow"}
    for fw, r in records.items():
        b = r["breakdown"]
        assert b is not None, (fw, r["error"])
        total = sum(b["categories"].values())
        # Categories, idle included, add up to the profiled step: nothing is lost.
        assert abs(total - b["profiled_step_s"]) <= 0.1 * b["profiled_step_s"]
        ops = {k: v for k, v in b["categories"].items() if k != IDLE}
        assert max(ops, key=ops.__getitem__) == "convolution", (fw, b["categories"])
        assert b["categories"].get("optimizer update", 0) > 0
        assert b["unprofiled_step_s"] and b["unprofiled_step_s"] > 0
        assert b["top_ops"] and b["top_ops"][0]["seconds_per_step"] > 0
        assert Path(b["trace"]).exists()  # Chrome trace file / TensorBoard log directory
    report = tmp_path / "report.html"
    assert fwbench("report", str(db), "-o", str(report)).returncode == 0
    assert "Where the step goes" in report.read_text()


def test_explain_refuses_an_unknown_stored_case(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench("explain", "--case", "feedbeef", "--db", str(db))
    assert proc.returncode == 2
    assert "no results file" in proc.stderr
