"""Tasks: what one timed step of a case is, one module and one registry entry each.

A task says what a step does (a training step, a forward pass), the unit its throughput
counts, whether it trains (data-parallel strategies need that) and whether it can be
served (LoadGen answers queries with it), its own dimensions (a generation's new tokens:
sizes of the work that are the task's, not the model's), and the figures it reports: one
step time for `train` and `infer`; a task like generation would name several, each with
its interval.
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
class Dimension:
    """A size of a task's work that is the task's own (a generation's new tokens). Declared
    once here, it is a case's `task_dims` entry, a `--task-dims NAME=VALUE` of the CLI, a
    sweep axis of its name, and part of the stored `task_dims` column."""

    name: str  # lower_snake_case: the sweep key and the NAME of --task-dims NAME=VALUE
    description: str
    default: int  # what a case of the task takes when it is left out
    minimum: int = 1
    maximum: int = 1 << 20
    short: str = ""  # how a case's shape writes it ("new" -> `new32`); the name if empty

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"task dimension {self.name!r}: use a lower_snake_case name")
        if not self.minimum <= self.default <= self.maximum:
            raise ValueError(f"task dimension {self.name}: its default is outside its range")

    def check(self, value: object) -> int:
        """The value as a case holds it, or ValueError naming the dimension and its range."""
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"task_dims: {self.name}={value!r} is not a whole number")
        if not self.minimum <= value <= self.maximum:
            raise ValueError(
                f"task_dims: {self.name}={value} is out of range "
                f"(valid: {self.minimum} to {self.maximum})"
            )
        return value


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
    # Its own dimensions, each with a default: a case of the task always has all of them
    # (a case of a task without any has none, and its key is as before they existed).
    dimensions: tuple[Dimension, ...] = ()

    def dimension(self, name: str) -> Dimension:
        for dim in self.dimensions:
            if dim.name == name:
                return dim
        if not self.dimensions:
            raise ValueError(f"task_dims: task {self.name} takes no dimensions (got {name})")
        valid = ", ".join(d.name for d in self.dimensions)
        raise ValueError(
            f"task_dims: task {self.name} has no dimension {name!r}; valid choices: {valid}"
        )


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


def task_dimensions() -> dict[str, Dimension]:
    """Every dimension some task declares, by name (the sweep axes they give)."""
    return {d.name: d for task in all_tasks().values() for d in task.dimensions}


def find_task(name: str) -> Task | None:
    """The task, or None when its plugin is not loaded (e.g. reading old results)."""
    return all_tasks().get(name)
