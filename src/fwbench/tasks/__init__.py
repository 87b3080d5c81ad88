"""Tasks: what one timed step of a case is, one module and one registry entry each.

A task says what a step does (a training step, a forward pass, a whole generation), the
unit its throughput counts, whether it trains (data-parallel strategies need that) and
whether it can be served (LoadGen answers queries with it), its own dimensions (a
generation's new tokens: sizes of the work that are the task's, not the model's), which
models it fits, and the figures it reports: one step time for `train` and `infer`;
`generate` names several (time to first token, time per output token, ...), each a value
per timed block with its own interval over runs, the first the one verdicts compare.
Frameworks declare the tasks they implement on their registry entry (`tasks`, with a
reason for each they refuse), so a case of a task its framework does not implement is
refused before any work, never measured as something else. The CLI's choices, sweeps,
reports and the store read this registry; a new task is one module here (or a plugin's)
plus one `register_task` (docs/adding-a-task.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from fwbench import plugins

# Declared in fwbench.dimensions, shared with the models' dimensions; named here too.
from fwbench.dimensions import Dimension as Dimension
from fwbench.errors import SpecError


@dataclass(frozen=True)
class Figure:
    """A time a case of a task reports: one value per timed block (seconds, the mean over
    the block's steps), one per run by the estimator, and the case's over its runs."""

    name: str  # the key in a result's figures: lower_snake_case, ends in `_s`
    label: str  # how tables name it: "time per output token"
    short: str = ""  # a column heading: "TPOT"; the label if empty
    # What it is, where the label leaves a choice open: "the mean of a generation's
    # decoding steps" (not their median); said beside its value.
    what: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not self.name.endswith("_s"):
            raise ValueError(f"figure {self.name!r}: use a lower_snake_case name ending in _s")


# Every task has it: the time of one whole step, timed by the driver's blocks.
STEP_TIME = Figure("step_time_s", "step time", "step")


@dataclass(frozen=True)
class Task:
    name: str  # the CLI's --task value, a sweep's task, the stored value
    label: str  # how reports name it: "training", "inference"
    description: str
    trains: bool = False  # a step updates the weights (data-parallel strategies need it)
    serves: bool = False  # LoadGen can serve it: a query is answered by one step
    # A step answers with a stream of units (a generation's tokens), the first sent as
    # soon as it is made: serving times the first unit and each later one (LoadGen's
    # token latencies), and a step's units per sample come from `units_from`.
    streams: bool = False
    unit: str = "samples"  # what its throughput counts, per second
    # The figures a case of this task reports, the first the one verdicts compare; the
    # step time is always one (the others the workload times inside its steps).
    figures: tuple[Figure, ...] = (STEP_TIME,)
    # Its own dimensions, each with a default: a case of the task always has all of them
    # (a case of a task without any has none, and its key is as before they existed).
    dimensions: tuple[Dimension, ...] = ()
    # The dimension that counts the units a step makes per sample (a generation's
    # new_tokens: its throughput is tokens per second); None: one unit per sample.
    units_from: str | None = None
    # The dimension counting the positions a step fills after its input's (a
    # generation's new_tokens: Case.positions); None: its input's alone.
    positions_from: str | None = None
    # Which models it takes (their ModelSpec): a generation, causal language models only.
    takes: Callable[[Any], bool] | None = None
    # Why a case of a model it takes cannot be made (the case and its ModelSpec), or
    # None when it can: a generation needs room for the prompt and the new tokens.
    fits: Callable[[Any, Any], str | None] | None = None

    def __post_init__(self) -> None:
        if any(d.default is None for d in self.dimensions):
            raise ValueError(f"task {self.name}: each of its dimensions needs a default")
        # Its dimensions are entries of a case's task_dims: their errors say so.
        own = tuple(replace(d, field="task_dims") for d in self.dimensions)
        object.__setattr__(self, "dimensions", own)
        names = [f.name for f in self.figures]
        if STEP_TIME.name not in names or len(set(names)) != len(names):
            raise ValueError(f"task {self.name}: figures must name step_time_s, each once")
        for named in (self.units_from, self.positions_from):
            if named and named not in {d.name for d in self.dimensions}:
                raise ValueError(f"task {self.name}: {named} is no dimension of the task")
        if self.streams and not (self.serves and self.units_from):
            raise ValueError(f"task {self.name}: a streaming task serves, and names units_from")

    @property
    def verdict_figure(self) -> str:
        """The figure verdicts, ratios and stopping rules read."""
        return self.figures[0].name

    def figure(self, name: str) -> Figure:
        found = {f.name: f for f in self.figures}
        if name not in found:
            raise ValueError(
                f"figure: task {self.name} has no figure {name!r}; "
                f"valid choices: {', '.join(found)}"
            )
        return found[name]

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


def causal_lm(spec: Any) -> bool:
    """Whether a model is a causal language model: it declares its context
    (fwbench.catalog.models.ModelSpec), as the tasks of decoders take them."""
    return getattr(spec, "context", None) is not None


_TASKS: dict[str, Task] = {}
_loaded = False
_BUILT_IN = ("train", "infer", "generate", "lora")


def register_task(task: Task) -> Task:
    """Add a task (a built-in module, or a plugin's: see docs/adding-a-task.md). A name
    that is taken is refused: a plugin's `train` would silently be one of the two."""
    if task.name not in _BUILT_IN:
        _load_built_in()
    found = _TASKS.get(task.name)
    if found is not None and found is not task and found != task:
        raise SpecError(
            f"task {task.name!r} is registered already ({found.label}); give yours a name "
            "of its own"
        )
    _TASKS[task.name] = task
    return task


def _load_built_in() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for module in _BUILT_IN:
            importlib.import_module(f"fwbench.tasks.{module}")


def _load() -> None:
    _load_built_in()
    # Each time, not once: it raises again while a plugin is broken.
    plugins.load()


def all_tasks() -> dict[str, Task]:
    """Every task, built-in ones first, in their order (whoever imported them first)."""
    _load()
    built_in = {name: _TASKS[name] for name in _BUILT_IN if name in _TASKS}
    return built_in | {name: task for name, task in _TASKS.items() if name not in built_in}


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


def verdict_figure(name: str) -> str:
    """The figure verdicts of task `name` read: its first; the step time for a task whose
    plugin is not loaded here."""
    task = find_task(name)
    return task.verdict_figure if task is not None else STEP_TIME.name


def find_task(name: str) -> Task | None:
    """The task, or None when its plugin is not loaded (e.g. reading old results)."""
    return all_tasks().get(name)
