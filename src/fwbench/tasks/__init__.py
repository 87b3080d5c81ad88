"""Tasks: what one timed step of a case is, one module and one registry entry each.

A task says what a step does (a training step, a forward pass), the unit its throughput
counts, whether it trains (data-parallel strategies need that) and whether it can be
served (LoadGen answers queries with it), and the figures it reports: one step time for
`train` and `infer`; a task like generation would name several, each with its interval.
Frameworks declare the tasks they implement on their registry entry (`tasks`, with a
reason for each they refuse), so a case of a task its framework does not implement is
refused before any work, never measured as something else. The CLI's choices, sweeps,
reports and the store read this registry; a new task is one module here (or a plugin's)
plus one `register_task` (docs/adding-a-task.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from fwbench import plugins
from fwbench.errors import SpecError


@dataclass(frozen=True)
class Task:
    name: str  # the CLI's --task value, a sweep's task, the stored value
    label: str  # how reports name it: "training", "inference"
    description: str
    trains: bool = False  # a step updates the weights (data-parallel strategies need it)
    serves: bool = False  # LoadGen can serve it: a query is answered by one step
    unit: str = "samples"  # what its throughput counts, per second
    # The figures a case of this task reports, the first the one verdicts compare.
    figures: tuple[str, ...] = ("step_time_s",)


_TASKS: dict[str, Task] = {}
_loaded = False
_BUILT_IN = ("train", "infer")


def register_task(task: Task) -> Task:
    """Add a task (a built-in module, or a plugin's: see docs/adding-a-task.md)."""
    _TASKS[task.name] = task
    return task


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in _BUILT_IN:
            importlib.import_module(f"fwbench.tasks.{module}")
    # Each time, not once: it raises again while a plugin is broken.
    plugins.load()


def all_tasks() -> dict[str, Task]:
    """Every task, built-in ones first."""
    _load()
    return dict(_TASKS)


def task_names() -> tuple[str, ...]:
    return tuple(all_tasks())


def get_task(name: str) -> Task:
    tasks = all_tasks()
    if name not in tasks:
        raise SpecError(f"task: unknown task {name!r}; valid choices: {', '.join(tasks)}")
    return tasks[name]


def find_task(name: str) -> Task | None:
    """The task, or None when its plugin is not loaded (e.g. reading old results)."""
    return all_tasks().get(name)
