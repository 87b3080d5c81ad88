"""A task added in one module (tests/plugins/fwbench_toy_task.py) is a task like any
other: offered by the CLI, expanded by sweeps, stored, measured by the frameworks it adds
a workload class to (PyTorch, built in, and the toy framework) through the registry
alone, and refused by every other framework, before any work and in the worker alike,
never measured as training or inference. No adapter is edited for it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fwbench.case import Case
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.errors import SpecError
from fwbench.frameworks import load_adapter
from fwbench.store.db import ResultStore
from fwbench.tasks import get_task
from tests.conftest import FAST_TIMING_YAML, fwbench

# The frameworks the toy task registers a workload class on.
IMPLEMENTED = {"torch", "numpy"}


def test_a_plugin_task_runs_where_it_registered_a_workload_and_is_refused_elsewhere(
    tmp_path: Path, toy_task_env: dict[str, str]
) -> None:
    env = toy_task_env
    assert get_task("probe").label == "probing"
    help_text = " ".join(fwbench("run", "--help", env=env).stdout.split())
    assert "probe" in help_text

    # Every other framework refuses it up front, with its entry's reason: none of them
    # has a class for it, and none was edited.
    for name, info in FRAMEWORKS.items():
        if name in IMPLEMENTED:
            assert info.does("probe").available
            continue
        with pytest.raises(SpecError, match=re.escape(f"task: {info.label} cannot probe: ")):
            Case.build(framework=name, model="toy_mlp", task="probe", batch_size=2)

    # A sweep gives each framework the tasks it implements; both measure their probe.
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: [torch, numpy]\nmodel: toy_mlp\ntask: [infer, probe]\nbatch_size: 64\n"
        "input_size: 8\nnum_classes: 10\nthreads: 1\n" + FAST_TIMING_YAML
    )
    db = tmp_path / "r.duckdb"
    proc = fwbench("sweep", str(spec), "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    records = {(r["framework"], r["task"]): r for r in json.loads(proc.stdout)}
    assert set(records) == {(f, t) for f in IMPLEMENTED for t in ("infer", "probe")}
    for key in [("numpy", "probe"), ("torch", "probe")]:
        assert records[key]["status"] == "ok", records[key]["error"]
    # The probe is measured on the model PyTorch builds for inference, counted alike.
    probe, infer = records[("torch", "probe")], records[("torch", "infer")]
    assert probe["param_count"] == infer["param_count"]  # the same model, built once
    with ResultStore(db, read_only=True) as store:
        stored = {r.case.task for r in store.results()}
    assert stored == {"infer", "probe"}

    # The CLI refuses it for a framework without it in one line, exit 2, nothing written.
    refused = tmp_path / "refused.duckdb"
    proc = fwbench("run", "--framework", "tensorflow", "--model", "resnet18", "--task",
                   "probe", "--db", str(refused), env=env)  # fmt: skip
    assert proc.returncode == 2 and "cannot probe" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not refused.exists()


def test_an_adapter_refuses_a_task_it_has_no_class_for(toy_task_env: dict[str, str]) -> None:
    """The registry refuses it first; a request read from a file is not validated again,
    so the adapter's lookup of its class is the last word, recorded unsupported."""
    from fwbench.frameworks.base import TaskNotImplemented, workload_class
    from fwbench.launch.worker import failure

    built = Case.build(framework="numpy", model="toy_mlp", task="infer", batch_size=2)
    case = built.model_copy(update={"task": "train"})  # as an edited request would say
    with pytest.raises(TaskNotImplemented) as refused:
        workload_class("numpy", case)
    found = failure(load_adapter("numpy"), refused.value, "cpu", {})
    assert found == {
        "status": "unsupported",
        "error": "TaskNotImplemented: task train: this adapter implements infer, probe only",
    }


def test_a_task_dimension_is_declared_once_and_read_by_the_case_cli_sweep_and_store(
    tmp_path: Path, toy_task_env: dict[str, str]
) -> None:
    """The toy task's `depth` is declared on its Task only; the case, `--task-dims`, the
    sweep's `depth` axis, the store's column and the reports' shape all follow from it."""
    env = toy_task_env
    probe = Case.build(framework="numpy", model="toy_mlp", task="probe", batch_size=2)
    assert probe.task_dims == "depth=1" and probe.shape.endswith(" d1")  # its default
    deep = Case.build(
        framework="numpy", model="toy_mlp", task="probe", batch_size=2, task_dims="depth=3"
    )
    assert deep.task_values == {"depth": 3} and deep.key() != probe.key()
    assert deep.workload_key() != probe.workload_key()  # different work: never compared
    assert Case.build(**{**deep.model_dump(), "task_dims": {"depth": "3"}}) == deep
    # A task without dimensions keeps its key: task_dims stays None and out of it.
    infer = Case.build(framework="numpy", model="toy_mlp", task="infer", batch_size=2)
    assert infer.task_dims is None and "task_dims" not in infer.model_dump(exclude_none=True)
    for bad, message in [
        ("depth=0", "task_dims: depth=0 is out of range (valid: 1 to 64)"),
        ("depth=two", "task_dims: depth='two' is not a whole number"),
        ("width=2", "task_dims: task probe has no dimension 'width'; valid choices: depth"),
        ("depth", "task_dims: 'depth' is not NAME=VALUE"),
    ]:
        with pytest.raises(SpecError, match=re.escape(message)):
            Case.build(framework="numpy", model="toy_mlp", task="probe", task_dims=bad)
    with pytest.raises(SpecError, match="task_dims: task infer takes no dimensions"):
        Case.build(framework="numpy", model="toy_mlp", task="infer", task_dims="depth=2")

    help_text = " ".join(fwbench("run", "--help", env=env).stdout.split())
    assert "--task-dims" in help_text and "depth" in help_text

    # The CLI: a bad value is one line, exit 2, nothing written.
    refused = tmp_path / "refused.duckdb"
    proc = fwbench("run", "--framework", "numpy", "--model", "toy_mlp", "--task", "probe",
                   "--task-dims", "depth=99", "--db", str(refused), env=env)  # fmt: skip
    assert proc.returncode == 2 and "depth=99 is out of range" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not refused.exists()

    # A sweep's `depth` axis applies to the probe cases only, `exclude` can name it, and
    # each value is a case of its own, measured by the framework that implements it.
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: [torch, numpy]\nmodel: toy_mlp\ntask: [infer, probe]\ndepth: [1, 2, 4]\n"
        "exclude:\n  - {depth: 4}\nbatch_size: 16\ninput_size: 8\nnum_classes: 10\n"
        "threads: 1\n" + FAST_TIMING_YAML
    )
    db = tmp_path / "r.duckdb"
    proc = fwbench("sweep", str(spec), "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert sorted((r["framework"], r["task"], r["task_dims"]) for r in records) == [
        ("numpy", "infer", None),
        ("numpy", "probe", "depth=1"),
        ("numpy", "probe", "depth=2"),
        ("torch", "infer", None),
        ("torch", "probe", "depth=1"),
        ("torch", "probe", "depth=2"),
    ]
    assert all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    with ResultStore(db, read_only=True) as store:
        rows = store.con.execute(
            "SELECT task_dims FROM results WHERE task = 'probe' ORDER BY task_dims"
        ).fetchall()
        stored = sorted(r.case.shape for r in store.results() if r.case.task == "probe")
    assert rows == [("depth=1",), ("depth=1",), ("depth=2",), ("depth=2",)]
    assert stored == ["8px c10 d1", "8px c10 d1", "8px c10 d2", "8px c10 d2"]

    # An axis no task of the sweep takes is refused, naming the tasks.
    spec.write_text("framework: numpy\nmodel: toy_mlp\ntask: infer\ndepth: 2\n")
    proc = fwbench("sweep", str(spec), "--db", str(tmp_path / "x.duckdb"), env=env)
    assert proc.returncode == 2
    assert "depth applies to none of the sweep's tasks (infer)" in proc.stderr


def test_a_task_dimension_is_declared_sanely(monkeypatch: pytest.MonkeyPatch) -> None:
    from fwbench import sweep, tasks
    from fwbench.tasks import Dimension, Task

    with pytest.raises(ValueError, match="lower_snake_case"):
        Dimension("NewTokens", "tokens generated", default=32)
    with pytest.raises(ValueError, match="default is outside its range"):
        Dimension("new_tokens", "tokens generated", default=0)
    # A dimension named like a case field would be read as that field's axis: refused.
    clash = Task("clash", "clashing", "a task for this test", dimensions=(
        Dimension("batch_size", "a second batch size", default=1),
    ))  # fmt: skip
    monkeypatch.setitem(tasks._TASKS, "clash", clash)
    with pytest.raises(SpecError, match="dimension 'batch_size' has the name of a sweep key"):
        sweep.parse("framework: torch\nmodel: resnet18\n")
