"""Shared fixtures. Framework tests run the real frameworks, in worker processes:
PyTorch and TensorFlow must never be imported into the same process (importing
torchvision after TensorFlow segfaults), and the test process imports neither."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fwbench.measure.settings import TimingConfig

# What fwbench keeps between commands (what a user's model declares) is the tests' own,
# here and in every process they start: one folder for the session, made by the process
# that starts it (pytest-xdist's workers inherit it) and removed when that one exits.
if "FWBENCH_CACHE_DIR" not in os.environ:
    _cache = tempfile.mkdtemp(prefix="fwbench-test-cache-")
    os.environ["FWBENCH_CACHE_DIR"] = _cache
    atexit.register(shutil.rmtree, _cache, True)

PLUGINS_DIR = Path(__file__).parent / "plugins"
DATA = Path(__file__).parent / "data"
# Where every test starts worker processes, a framework or the CLI as a user runs it: the
# inner loop leaves them out (`pytest -m "not slow"`, under five minutes on 2 cores), CI
# runs everything. A unit test that takes seconds says so itself (@pytest.mark.slow).
SLOW_FOLDERS = ("frameworks", "e2e", "launch")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        parts = item.path.relative_to(root).parts if item.path.is_relative_to(root) else ()
        if parts and parts[0] in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


# TensorFlow loaded in the test process makes a later import of triton there (torch's, by
# an in-process test) a segmentation fault that ends the whole suite: collecting the tests
# must not import it (look a package up with importlib.util.find_spec, not
# pytest.importorskip, where importing it would load TensorFlow: keras, keras_hub).
def pytest_collection_finish(session: pytest.Session) -> None:
    loaded = [name for name in ("tensorflow", "keras") if name in sys.modules]
    if loaded:
        raise pytest.UsageError(
            f"collecting the tests imported {', '.join(loaded)} into the test process; "
            "import it inside the test, or in a worker"
        )


# Enough to exercise every stage of the timing loop, quickly: one short run per case
# (tests about the statistics over runs ask for more).
FAST_TIMING = TimingConfig(
    min_warmup_steps=1,
    max_warmup_s=0.3,
    min_samples=5,
    max_time_s=0.3,
    run_time_s=0.3,
    max_warmup_steps=10,
    min_runs=1,
    max_runs=1,
)
FAST_TIMING_YAML = (
    "timing: {min_warmup_steps: 1, max_warmup_s: 0.3, min_samples: 5, max_time_s: 0.3, "
    "run_time_s: 0.3, min_runs: 1, max_runs: 1}\n"
)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small results database, imported once per test module (no benchmark runs)."""
    from fwbench.store.db import ResultStore
    from fwbench.store.imports import read_records

    db = tmp_path_factory.mktemp("stored") / "results.duckdb"
    with ResultStore(db) as store:
        store.add_many(read_records(DATA / "results-schema8.json"), "import")
    return db


def _with_plugins(monkeypatch: pytest.MonkeyPatch, *modules: str) -> dict[str, str]:
    """Register plugin modules in this process (dropped after the test) and in workers."""
    import fwbench.catalog.frameworks as frameworks
    import fwbench.catalog.models as models
    import fwbench.measure.trackers as trackers
    import fwbench.plugins as plugins
    import fwbench.tasks as tasks

    # Load the real registries first, then the plugins into copies dropped after the test.
    models.all_models()
    tasks.all_tasks()
    monkeypatch.setattr(tasks, "_TASKS", dict(tasks._TASKS))
    monkeypatch.setattr(tasks, "_loaded", False)
    monkeypatch.setattr(models, "_MODELS", dict(models._MODELS))
    monkeypatch.setattr(models, "_BUILDERS", {k: dict(v) for k, v in models._BUILDERS.items()})
    monkeypatch.setattr(models.DIMENSIONS, "_entries", dict(models.DIMENSIONS._entries))
    monkeypatch.setattr(frameworks.FRAMEWORKS, "_entries", dict(frameworks.FRAMEWORKS._entries))
    monkeypatch.setattr(trackers, "_TRACKERS", dict(trackers._TRACKERS))
    monkeypatch.setattr(plugins, "_loaded", False)
    monkeypatch.setattr(plugins, "_failure", None)
    for module in modules:
        # A plugin imported by an earlier test would not register again: import it afresh.
        monkeypatch.delitem(sys.modules, module, raising=False)
    monkeypatch.setenv("FWBENCH_PLUGINS", ",".join(modules))
    path = os.pathsep.join(filter(None, [str(PLUGINS_DIR), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("PYTHONPATH", path)
    monkeypatch.syspath_prepend(str(PLUGINS_DIR))
    return dict(os.environ)


@pytest.fixture
def plugin_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Register the test-only models (crash, hang, tiny_cnn) in this process and in workers."""
    return _with_plugins(monkeypatch, "fwbench_test_models")


@pytest.fixture
def toy_framework_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Register the toy framework `numpy` (and its model toy_mlp) here and in workers."""
    return _with_plugins(monkeypatch, "fwbench_toy_framework")


@pytest.fixture
def toy_dimension_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Register the toy model `toy_signal` and its dimension `length` here and in workers."""
    return _with_plugins(monkeypatch, "fwbench_toy_dimension")


@pytest.fixture
def toy_task_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Register the toy task `probe` and the toy framework that implements it."""
    return _with_plugins(monkeypatch, "fwbench_toy_framework", "fwbench_toy_task")


@pytest.fixture
def toy_tracker_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Register the toy trackers (and the test models) here and in workers."""
    return _with_plugins(monkeypatch, "fwbench_test_models", "fwbench_toy_tracker")


@pytest.fixture
def broken_tracker_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Register trackers that raise (and the test models) here and in workers."""
    return _with_plugins(monkeypatch, "fwbench_test_models", "fwbench_broken_tracker")


def fwbench(
    *args: str, env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run the real CLI in a subprocess, as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "fwbench", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
