"""Trackers (fwbench.measure.trackers): a tracker added in one module
(tests/plugins/fwbench_toy_tracker.py) runs on its side around the steady state and its
result is a validated field of the stored record; the built-in ones fill theirs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fwbench.errors import SpecError
from fwbench.measure import trackers
from fwbench.store.db import ResultStore
from tests.conftest import fwbench

TIMING = (
    "timing: {min_warmup_steps: 1, max_warmup_s: 0.3, min_samples: 5, max_time_s: 0.6, "
    "run_time_s: 0.3, min_runs: 2, max_runs: 2}\n"
)


def _measured(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    """One tiny PyTorch case of two runs, measured through the CLI: its record."""
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: torch\nmodel: tiny_cnn\ntask: infer\nbatch_size: 2\nthreads: 1\n" + TIMING
    )
    proc = fwbench("sweep", str(spec), "--db", str(tmp_path / "r.duckdb"), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(proc.stdout)
    assert record["status"] == "ok", record["error"]
    return record


def test_a_plugin_tracker_is_one_module_and_its_result_is_stored(
    tmp_path: Path, toy_tracker_env: dict[str, str]
) -> None:
    record = _measured(tmp_path, toy_tracker_env)
    db = tmp_path / "r.duckdb"
    runs = record["runs"]
    assert len(runs) == 2
    worker = record["tracked"]["toy-worker-blocks"]
    # The worker's tracker saw the first run's timed blocks, and none of its warmup.
    assert worker["blocks"] == len(runs[0]["samples"])
    assert worker["steps"] == len(runs[0]["samples"]) * runs[0]["steps_per_block"]
    # The driver's tracker saw every run's blocks.
    driver = record["tracked"]["toy-driver-blocks"]
    assert driver["blocks"] == sum(len(r["samples"]) for r in runs)
    # Built-in trackers fill the record's own fields.
    assert record["memory"]["host_peak_bytes"] > 0
    assert record["work"]["flops_per_step"] > 0
    assert record["energy"]["status"] in ("measured", "unavailable")

    with ResultStore(db, read_only=True) as store:
        (stored,) = store.results()
    assert stored.tracked == record["tracked"]
    out = tmp_path / "export.json"
    assert fwbench("export", "--db", str(db), "-o", str(out), env=toy_tracker_env).returncode == 0
    assert json.loads(out.read_text())[0]["tracked"] == record["tracked"]


def test_a_failing_tracker_costs_its_figure_not_the_case(
    tmp_path: Path, broken_tracker_env: dict[str, str]
) -> None:
    record = _measured(tmp_path, broken_tracker_env)
    assert len(record["runs"]) == 2
    warnings = " ".join(record["warnings"])
    assert "tracker 'broken-worker' failed in stop: RuntimeError: worker-side" in warnings
    assert "tracker 'broken-driver' failed in after_block: RuntimeError: driver-side" in warnings
    assert record["tracked"] == {}
    assert record["memory"]["host_peak_bytes"] > 0  # the other trackers kept theirs


def test_results_of_several_trackers_merge_into_the_field_they_fill() -> None:
    memory = {
        "host_baseline_bytes": 1,
        "host_peak_bytes": 3,
        "host_framework_bytes": 2,
        "host_method": "test",
        "device": {"torch_max_allocated_bytes": 5},
    }
    fields, extra, problems = trackers.record_fields(
        {"memory": memory, "nvml": {"device": {"nvml_used_peak_bytes": 7}}, "gone": {"x": 1}}
    )
    assert fields["memory"]["device"] == {
        "torch_max_allocated_bytes": 5,
        "nvml_used_peak_bytes": 7,
    }
    assert extra == {} and problems == []  # a tracker not registered here is not recorded
    # A tracker that only extends a field adds nothing where no tracker filled it.
    fields, _, _ = trackers.record_fields({"nvml": {"device": {"nvml_used_peak_bytes": 7}}})
    assert "memory" not in fields


def test_a_tracker_needs_a_new_name_and_a_place_in_the_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(trackers, "_TRACKERS", dict(trackers._TRACKERS))
    with pytest.raises(SpecError, match="already registered"):
        trackers.register_tracker(trackers.TrackerInfo("memory", "worker", trackers.Memory))
    with pytest.raises(SpecError, match="record field it fills or its model"):
        trackers.register_tracker(trackers.TrackerInfo("x", "worker", trackers.Memory))
