"""Memory, energy and FLOPs measured with the real frameworks, in real workers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.result import Result
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING, fwbench


def run(cases: list[Case], db: Path, interleave: bool = False) -> list[Result]:
    with ResultStore(db) as store:
        options = RunOptions(timing=FAST_TIMING, interleave=interleave)
        return list(run_cases(cases, store, "test", options))


def case(framework: str, model: str, task: str, batch: int, size: int, **kw: object) -> Case:
    mode = "graph" if framework == "tensorflow" else "eager"
    fields: dict[str, object] = {
        "framework": framework,
        "model": model,
        "task": task,
        "batch_size": batch,
        "input_size": size,
        "mode": mode,
        "threads": 1,
    }
    fields.update(kw)
    return Case.build(**fields)


def test_resnet50_forward_flops_match_the_published_count_in_both_frameworks(
    tmp_path: Path,
) -> None:
    published = 8.2e9  # ~4.1 GMACs at 224 x 224
    results = run(
        [case(fw, "resnet50", "infer", 1, 224) for fw in ("torch", "tensorflow")],
        tmp_path / "r.duckdb",
    )
    for r in results:
        assert r.status == "ok", r.error
        assert r.work is not None and r.work.flops_per_step is not None, r.work
        assert r.work.flops_per_step == pytest.approx(published, rel=0.05), r.case.framework
        assert r.work.achieved_flops_per_s and r.work.achieved_flops_per_s > 0
    torch_flops, tf_flops = (r.work.flops_per_step for r in results if r.work)
    assert tf_flops == pytest.approx(torch_flops, rel=0.01)


def test_training_flops_agree_between_frameworks_and_interleaving_alternates(
    tmp_path: Path,
) -> None:
    cases = [case(fw, "resnet18", "train", 2, 64, num_classes=10) for fw in ("torch", "tensorflow")]
    results = run(cases, tmp_path / "r.duckdb", interleave=True)
    flops = [r.work.flops_per_step for r in results if r.work]
    assert all(r.status == "ok" for r in results), [r.error for r in results]
    assert flops[0] and flops[1]
    assert flops[1] == pytest.approx(flops[0], rel=0.01)
    # Forward + two backward products: about three times the forward FLOPs.
    samples = [len(r.measurement.samples) for r in results if r.measurement]
    assert samples[0] == samples[1]  # one block each, in turn, until both may stop


def test_memory_peak_holds_weights_and_input_and_energy_says_why_it_is_missing(
    tmp_path: Path,
) -> None:
    batch, size = 16, 224
    (r,) = run([case("torch", "resnet18", "infer", batch, size)], tmp_path / "r.duckdb")
    assert r.status == "ok", r.error
    assert r.memory is not None
    weights = 11_689_512 * 4
    image = batch * 3 * size * size * 4
    assert r.memory.host_framework_bytes >= weights + image
    assert r.memory.host_peak_bytes >= r.memory.host_baseline_bytes + weights + image
    assert r.memory.host_method.startswith("steady-state peak")
    assert r.memory.device is None  # CPU: no device allocator
    assert r.energy is not None
    if r.energy.status == "unavailable":  # as on machines without RAPL counters
        assert r.energy.reason and "RAPL" in r.energy.reason
        assert r.energy.joules_per_sample is None
    else:
        assert r.energy.joules_per_sample and r.energy.joules_per_sample > 0


def test_peak_is_measured_and_later_results_show_their_share(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench(
        "peak", "--size", "512", "--dtype", "fp32", "--threads", "1", "--db", str(db), "--json"
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert {"torch", "tensorflow"} <= {r["framework"] for r in rows}
    assert "keras-torch" not in {r["framework"] for r in rows}  # PyTorch's own kernels
    assert all(r["flops_per_s"] > 1e8 for r in rows)
    (r,) = run([case("torch", "resnet18", "infer", 1, 64)], db)
    assert r.work is not None
    assert r.work.peak_flops_per_s == max(row["flops_per_s"] for row in rows)
    assert r.work.share_of_peak is not None and 0 < r.work.share_of_peak < 1.5
