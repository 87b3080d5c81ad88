"""A task added in one module (tests/plugins/fwbench_toy_task.py) is a task like any
other: offered by the CLI, expanded by sweeps, stored, measured by the framework that
declares it, and refused by every framework that does not, before any work and in the
worker alike, never measured as training or inference."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fwbench.case import Case
from fwbench.errors import SpecError
from fwbench.frameworks.registry import FRAMEWORKS
from fwbench.store.db import ResultStore
from fwbench.tasks import get_task
from tests.conftest import FAST_TIMING_YAML, fwbench


def test_a_plugin_task_is_offered_measured_stored_and_refused_where_undeclared(
    tmp_path: Path, toy_task_env: dict[str, str]
) -> None:
    env = toy_task_env
    assert get_task("probe").label == "probing"
    help_text = " ".join(fwbench("run", "--help", env=env).stdout.split())
    assert "probe" in help_text

    # Every built-in framework refuses it up front: none has a step for it.
    for name, info in FRAMEWORKS.items():
        if name == "numpy":
            continue
        with pytest.raises(SpecError, match=re.escape(f"task: {info.label} cannot probe: ")):
            Case.build(framework=name, model="toy_mlp", task="probe", batch_size=2)

    # A sweep gives each framework the tasks it declares; the toy measures its probe.
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: [torch, numpy]\nmodel: toy_mlp\ntask: [infer, probe]\nbatch_size: 64\n"
        "input_size: 8\nnum_classes: 10\nthreads: 1\n" + FAST_TIMING_YAML
    )
    db = tmp_path / "r.duckdb"
    proc = fwbench("sweep", str(spec), "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    records = {(r["framework"], r["task"]): r for r in json.loads(proc.stdout)}
    assert set(records) == {("torch", "infer"), ("numpy", "infer"), ("numpy", "probe")}
    probe = records[("numpy", "probe")]
    assert probe["status"] == "ok", probe["error"]
    with ResultStore(db, read_only=True) as store:
        stored = {r.case.task for r in store.results()}
    assert stored == {"infer", "probe"}

    # The CLI refuses it for torch in one line, exit 2, nothing written.
    refused = tmp_path / "refused.duckdb"
    proc = fwbench("run", "--framework", "torch", "--model", "toy_mlp", "--task", "probe",
                   "--db", str(refused), env=env)  # fmt: skip
    assert proc.returncode == 2 and "cannot probe" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not refused.exists()


def test_an_adapter_refuses_a_task_it_has_no_step_for(toy_task_env: dict[str, str]) -> None:
    """The registry refuses it first (a request re-validates its case, in the worker too);
    an adapter's own `require_task` is the last word, recorded unsupported."""
    from fwbench.frameworks.base import TaskNotImplemented, require_task
    from fwbench.launch.worker import failure

    case = Case.build(framework="numpy", model="toy_mlp", task="probe", batch_size=2)
    with pytest.raises(TaskNotImplemented) as refused:
        require_task(case, ("train", "infer"))
    adapter = FRAMEWORKS["numpy"].load_adapter()
    found = failure(adapter, refused.value, "cpu", {})
    assert found == {
        "status": "unsupported",
        "error": "TaskNotImplemented: task probe: this adapter implements train, infer only",
    }
