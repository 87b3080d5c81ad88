"""The CLI's choices, generated from the registries: help texts and shell completion
list what this install offers, so they cannot drift from it."""

from __future__ import annotations

import functools
from collections.abc import Callable

from fwbench.case import DEVICES, LAYOUTS, PRECISIONS
from fwbench.catalog.frameworks import FRAMEWORKS, Setting, core_frameworks
from fwbench.plugins import PluginError
from fwbench.tasks import all_tasks, task_names


def _join(values: list[str] | tuple[str, ...]) -> str:
    return " | ".join(values)


def _listed(text: Callable[..., str]) -> Callable[..., str]:
    """A help text from the registries, or what stops them where a plugin is broken: the
    help is built when the CLI is imported and must still show (commands then refuse)."""

    @functools.wraps(text)
    def listed(*args: str) -> str:
        try:
            return text(*args)
        except PluginError as exc:
            return f"(choices not listed: {exc})"

    return listed


@_listed
def frameworks_help(extra: str = "repeat to compare frameworks.") -> str:
    return f"{_join(list(FRAMEWORKS))}; {extra}"


@_listed
def modes_help() -> str:
    per_framework = "; ".join(f"{name}: {', '.join(i.modes)}" for name, i in FRAMEWORKS.items())
    return f"{per_framework}. One for all frameworks, or one each."


def _settings_per_framework() -> str:
    """Each framework's own settings and their values, as the help texts list them."""

    def scope(setting: Setting) -> str:
        return f" ({setting.scope()})" if setting.scope() else ""

    return "; ".join(
        f"{name}: " + ", ".join(f"{s.name}={'|'.join(s.values)}{scope(s)}" for s in i.settings)
        for name, i in FRAMEWORKS.items()
        if i.settings
    )


@_listed
def options_help() -> str:
    per_framework = _settings_per_framework()
    return (
        f"The framework's own switches, NAME=VALUE[,NAME=VALUE] ({per_framework}); left out, "
        "the framework decides. One for all frameworks, or one each ('default' for none)."
    )


@_listed
def task_dims_help() -> str:
    per_task = "; ".join(
        f"{task.name}: "
        + ", ".join(f"{d.name} ({d.description}; default {d.default})" for d in task.dimensions)
        for task in all_tasks().values()
        if task.dimensions
    )
    return (
        "The task's own dimensions, NAME=VALUE[,NAME=VALUE]"
        + (f" ({per_task})" if per_task else " (no task of this install has any)")
        + "; left out, each takes its default."
    )


def complete_task_dims(incomplete: str) -> list[str]:
    names = dict.fromkeys(f"{d.name}=" for t in all_tasks().values() for d in t.dimensions)
    return _starting(list(names), incomplete)


@_listed
def strategies_help() -> str:
    per_framework = "; ".join(
        f"{name}: {', '.join(s.name for s in i.strategies)}"
        for name, i in FRAMEWORKS.items()
        if i.strategies
    )
    return f"Data parallelism ({per_framework}); one for all frameworks, or one each."


@_listed
def tune_modes_help() -> str:
    slow = ", ".join(m for i in FRAMEWORKS.values() for m in i.slow_modes)
    return f"Modes to try (repeat). [default: every mode but the slow ones: {slow}]"


@_listed
def tune_options_help() -> str:
    per_framework = _settings_per_framework()
    return (
        "The frameworks' own settings to try (repeat), NAME=VALUE[,NAME=VALUE], each for the "
        f"frameworks that have it; 'default' tries none. [default: every value of every "
        f"setting: {per_framework}]"
    )


PRECISION_HELP = f"{_join(PRECISIONS)}: tf32 on cuda only; bf16, fp16 mixed. [default: fp32]"
LAYOUT_HELP = f"{_join(LAYOUTS)} (image models). [default: the framework's own]"
TASK_HELP = _listed(lambda: _join(task_names()))()


@_listed
def served_tasks_help() -> str:
    """The tasks LoadGen can serve, each with what a query is."""
    served = [t for t in all_tasks().values() if t.serves]
    return "; ".join(f"{t.name}: a query is {t.description}" for t in served) + "."


DEVICE_HELP = _join(DEVICES)
CORE_HELP = _listed(lambda: ", ".join(core_frameworks()))()


def _starting(values: list[str] | tuple[str, ...], incomplete: str) -> list[str]:
    return [v for v in values if v.startswith(incomplete)]


def complete_framework(incomplete: str) -> list[str]:
    return _starting(list(FRAMEWORKS), incomplete)


def complete_mode(incomplete: str) -> list[str]:
    modes = dict.fromkeys(m for info in FRAMEWORKS.values() for m in info.modes)
    return _starting(list(modes), incomplete)


def complete_strategy(incomplete: str) -> list[str]:
    names = [s.name for info in FRAMEWORKS.values() for s in info.strategies]
    return _starting(names, incomplete)


def complete_model(incomplete: str) -> list[str]:
    from fwbench.catalog.models import all_models  # loads plugins: only when completing

    return _starting(sorted(all_models()), incomplete)


def complete_precision(incomplete: str) -> list[str]:
    return _starting(PRECISIONS, incomplete)


def complete_layout(incomplete: str) -> list[str]:
    return _starting(LAYOUTS, incomplete)


def complete_task(incomplete: str) -> list[str]:
    return _starting(task_names(), incomplete)


def complete_device(incomplete: str) -> list[str]:
    return _starting(DEVICES, incomplete)
