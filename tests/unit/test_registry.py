"""A framework is known in one place: its registry entry. The CLI's help and completion
come from it, and no module outside the framework's own code names it. A task likewise:
nothing outside tasks/ writes its name."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fwbench.catalog.frameworks import FRAMEWORKS, core_frameworks
from fwbench.catalog.strategies import all_strategies
from fwbench.cli import choices
from fwbench.cli.app import app
from fwbench.report.style import colour, dash

SRC = Path(__file__).resolve().parents[2] / "src" / "fwbench"
# The framework's own code: its registry entry, its adapter, its model builders, its
# data-parallel workloads; and the model sources' entries, each naming the frameworks
# that run it.
OWN = (
    "catalog/frameworks.py",
    "catalog/sources.py",
    "frameworks/",
    "models/",
    "distributed/torch_dp.py",
    "distributed/tf_dp.py",
)


def test_no_framework_name_is_written_outside_its_own_code() -> None:
    names = set(FRAMEWORKS)
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(OWN):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert found == [], "framework names outside the registry:\n" + "\n".join(found)


def test_no_task_name_is_written_outside_the_tasks() -> None:
    """A task owns its behaviour: adapters, reports, defaults and the CLI name a task
    through its Task (fwbench.tasks), never by a string of its name, so that adding a task
    edits no module that does not implement it."""
    from fwbench.tasks import task_names

    names = set(task_names())
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith("tasks/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert found == [], "task names outside tasks/:\n" + "\n".join(found)


def test_a_framework_supports_the_tasks_it_has_a_workload_class_for() -> None:
    """Its supported tasks derive from its map of task to workload class; nothing else
    lists them."""
    for info in FRAMEWORKS.values():
        assert info.tasks == tuple(task for task, _ in info.workloads)
        assert all(":" in path for _, path in info.workloads), info.name
        for task in info.tasks:
            assert info.does(task).available


def test_help_and_completion_list_what_the_registry_offers() -> None:
    text = " ".join(CliRunner().invoke(app, ["run", "--help"], terminal_width=400).output.split())
    for name, info in FRAMEWORKS.items():
        assert name in text
        assert f"{name}: {', '.join(info.modes)}" in choices.modes_help()
    for strategy in all_strategies():
        assert strategy in choices.strategies_help()
    assert choices.complete_framework("keras") == ["keras-jax", "keras-torch"]
    assert "compile-max-autotune" in choices.complete_mode("compile")
    assert "jit" in choices.complete_mode("")
    assert "resnet18" in choices.complete_model("res")
    assert core_frameworks() == ["torch", "tensorflow"]


def test_every_mode_has_its_own_look_and_every_framework_its_colour() -> None:
    for name, info in FRAMEWORKS.items():
        assert colour(f"{name}/{info.modes[0]}") == info.colour
        looks = {dash(f"{name}/{mode}") for mode in info.modes}
        assert len(looks) == len(info.modes), name


def test_what_a_framework_cannot_do_is_refused_before_any_work(tmp_path: Path) -> None:
    from fwbench.api import RunOptions, _request
    from fwbench.case import Case
    from fwbench.launch.records import _no_flops
    from fwbench.measure.settings import TimingConfig

    db = tmp_path / "r.duckdb"
    found = CliRunner().invoke(
        app, ["explain", "--framework", "litert", "--model", "resnet18", "--db", str(db)]
    )
    assert found.exit_code != 0
    reason = "fwbench does not read LiteRT's profiles yet"
    assert f"explain: litert cannot: {reason}" in str(found.exception)
    assert not db.exists()
    case = Case.build(framework="keras-jax", model="resnet18", mode="jit", threads=1)
    assert _request(case, RunOptions(timing=TimingConfig())).sent.count_flops is False
    work = _no_flops(case)
    assert work is not None
    assert "not counted for keras-jax: counted from its programs as Flax's" in str(work.error)


def test_a_parameter_count_is_cached_under_fwbenchs_model_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count cached before a builder was added or changed (a model flax did not build,
    a layer's width) is not read after: the cache's version carries the code's identity."""
    import shutil

    import fwbench.models
    from fwbench.launch import counting

    copy = tmp_path / "models"
    shutil.copytree(fwbench.models.__path__[0], copy)
    monkeypatch.setattr(fwbench.models, "__path__", [str(copy)])
    try:
        counting._model_code.cache_clear()
        before = counting.counted_version("torch")
        counting._model_code.cache_clear()
        assert counting.counted_version("torch") == before  # the same code: the same key
        edited = copy / "flax_vision.py"
        edited.write_text(edited.read_text() + "\n# wider\n")
        counting._model_code.cache_clear()
        after = counting.counted_version("torch")
    finally:
        counting._model_code.cache_clear()
    assert before is not None and after is not None and before != after
    assert before.startswith(torch_version()) and after.startswith(torch_version())


def torch_version() -> str:
    from importlib.metadata import version

    return version("torch")
