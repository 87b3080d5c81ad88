"""A framework added in one module (tests/plugins/fwbench_toy_framework.py) is a framework
like any other: listed by the CLI, measured beside PyTorch, checked for the same work,
shown in reports, and refused up front for what its registry entry says it cannot do."""

from __future__ import annotations

import json
from pathlib import Path

from fwbench.catalog.frameworks import FRAMEWORKS
from tests.conftest import FAST_TIMING_YAML, fwbench


def test_a_plugin_framework_runs_beside_torch(tmp_path: Path, toy_framework_env: dict) -> None:
    env = toy_framework_env
    assert "numpy" in FRAMEWORKS and FRAMEWORKS["numpy"].label == "NumPy (toy)"

    help_text = " ".join(fwbench("run", "--help", env=env).stdout.split())
    assert "numpy" in help_text

    # A sweep over both tasks gives the toy its infer case only: it cannot train.
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: [torch, numpy]\nmodel: toy_mlp\ntask: [train, infer]\nbatch_size: 4\n"
        "input_size: 8\nnum_classes: 10\nthreads: 1\n" + FAST_TIMING_YAML
    )
    db = tmp_path / "r.duckdb"
    proc = fwbench("sweep", str(spec), "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    records = {(r["framework"], r["task"]): r for r in json.loads(proc.stdout)}
    assert set(records) == {("torch", "train"), ("torch", "infer"), ("numpy", "infer")}
    toy = records[("numpy", "infer")]
    assert toy["status"] == "ok", toy["error"]
    assert toy["environment"]["numpy"]
    # Same model, same parameters: 3*8*8*64 + 64 + 64*10 + 10 in both frameworks.
    assert toy["parity"]["counts"] == {"numpy": 13002, "torch": 13002}
    assert "different" not in json.dumps(toy["parity"]).lower()
    # The FLOP count is not asked of a framework that cannot count: the record says why.
    assert "toy counts no FLOPs" in json.dumps(toy)

    out = tmp_path / "report.html"
    proc = fwbench("report", str(db), "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert "numpy" in html and "#4dabcf" in html.lower()  # its own colour, from its entry

    # What the entry refuses is refused before any work, in one line, exit 2.
    for args, reason in (
        (["run", "--framework", "numpy", "--model", "toy_mlp", "--task", "train"], "cannot train"),
        (["explain", "--framework", "numpy", "--model", "toy_mlp"], "no profiler"),
    ):
        proc = fwbench(*args, "--db", str(tmp_path / "refused.duckdb"), env=env)
        assert proc.returncode == 2, proc.stderr
        assert reason in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "refused.duckdb").exists()
