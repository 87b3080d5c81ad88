"""A plugin that cannot be imported (issue 29): every command refuses in one line that
names it, help still shows and says so; never a traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import fwbench

BROKEN = {
    "syntax": ("x = 1\n\ndef f(:\n", "SyntaxError: invalid syntax (syntax.py, line 3)"),
    "raises": ("raise RuntimeError('boom')\n", "RuntimeError: boom"),
    "exits": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "missing": (None, "ModuleNotFoundError: No module named 'missing'"),
}


def env_with(tmp_path: Path, module: str, source: str | None) -> dict[str, str]:
    if source is not None:
        (tmp_path / f"{module}.py").write_text(source)
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return {**os.environ, "FWBENCH_PLUGINS": module, "PYTHONPATH": path}


@pytest.mark.parametrize("module", list(BROKEN))
def test_a_broken_plugin_stops_a_command_in_one_line(tmp_path: Path, module: str) -> None:
    source, why = BROKEN[module]
    done = fwbench("models", env=env_with(tmp_path, module, source), timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == f"error: plugin {module!r} failed to import: {why}"
    assert done.stdout == ""


def test_help_shows_and_names_the_broken_plugin(tmp_path: Path) -> None:
    env = env_with(tmp_path, "syntax", BROKEN["syntax"][0])
    top = fwbench("--help", env=env, timeout=120)
    assert top.returncode == 0, top.stderr
    text = " ".join(top.stdout.split())
    assert "plugin 'syntax' failed to import: SyntaxError" in text
    run_help = fwbench("run", "--help", env=env, timeout=120)
    assert run_help.returncode == 0, run_help.stderr
    assert "Traceback" not in run_help.stderr


def test_a_plugin_interrupted_while_importing_is_one_line(tmp_path: Path) -> None:
    done = fwbench("results", env=env_with(tmp_path, "ctrlc", "raise KeyboardInterrupt\n"))
    assert done.returncode == 130
    assert done.stderr.strip() == "error: plugin 'ctrlc' was interrupted while importing"


@pytest.mark.parametrize(
    ("source", "says"),
    [
        (
            "from fwbench.catalog.models import ModelSpec, register\n"
            "register(ModelSpec(name='resnet18', family='mine', input_kind='image',"
            " builders={}))\n",
            "model 'resnet18' is registered already (vision: ResNet-18)",
        ),
        (
            "from fwbench.catalog.models import ModelSpec, register\n"
            "register(ModelSpec(name='MyNet', family='mine', input_kind='image',"
            " builders={}))\n",
            "model 'MyNet': a model's name is lower case; register it as 'mynet'",
        ),
        (
            "from fwbench.tasks import Task, register_task\n"
            "register_task(Task(name='train', label='mine', description='mine'))\n",
            "task 'train' is registered already (training)",
        ),
    ],
)
def test_a_plugin_that_takes_a_built_in_name_is_refused(
    tmp_path: Path, source: str, says: str
) -> None:
    """A plugin registering `resnet18` was silently ignored (issue 43, defect 9)."""
    done = fwbench("models", "--no-flops", env=env_with(tmp_path, "taken", source), timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: plugin 'taken' failed to import: ")
    assert says in done.stderr and done.stderr.count("\n") == 1
