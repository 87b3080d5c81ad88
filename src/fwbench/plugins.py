"""Loading user plugins: modules that register models or frameworks.

A plugin is a module that calls `fwbench.catalog.models.register(...)`,
`fwbench.catalog.frameworks.register_framework(...)`,
`fwbench.measure.trackers.register_tracker(...)` or `fwbench.tasks.register_task(...)`
when imported. fwbench finds it through the `fwbench.models`, `fwbench.frameworks`,
`fwbench.trackers` or `fwbench.tasks` entry-point
groups of an installed package, or through the FWBENCH_PLUGINS environment variable
(comma-separated module names on the Python path). Workers inherit the variable, so a
plugin registered here is registered in every worker too. The registries call
`load()`; it imports each plugin once, whichever registry asks first.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from importlib.metadata import entry_points

from fwbench.errors import SpecError, one_line

GROUPS = ("fwbench.frameworks", "fwbench.models", "fwbench.trackers", "fwbench.tasks")
ENV = "FWBENCH_PLUGINS"

_loaded = False
# The first plugin that failed: every later load() raises it again, so that nothing runs
# on registries that hold only part of what the user asked for.
_failure: PluginError | None = None


class PluginError(SpecError):
    """A plugin failed to import: exit code 2, or 130 when its import was interrupted."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def names() -> list[str]:
    """The modules FWBENCH_PLUGINS names."""
    return [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]


def modules() -> list[str]:
    """Every plugin's module: the entry points' and those FWBENCH_PLUGINS names."""
    found = [ep.module for group in GROUPS for ep in entry_points(group=group)]
    return sorted({*found, *names()})


def load() -> None:
    global _loaded, _failure
    if _failure is not None:
        raise PluginError(str(_failure), _failure.exit_code) from None
    if _loaded:
        return
    # Set first: a plugin imports the registries, which call back here.
    _loaded = True
    try:
        for group in GROUPS:
            for ep in entry_points(group=group):
                _import(f"plugin {ep.name!r} (entry point in {group})", ep.load)
        for module in names():
            _import(f"plugin {module!r}", functools.partial(importlib.import_module, module))
    except PluginError as exc:
        _failure = exc
        raise


def failure() -> PluginError | None:
    """Why the plugins could not all be imported (importing them first), or None."""
    try:
        load()
    except PluginError as exc:
        return exc
    return None


def _import(what: str, do: Callable[[], object]) -> None:
    try:
        do()
    except SpecError as exc:
        raise PluginError(f"{what} failed to import: {exc}") from exc
    except KeyboardInterrupt as exc:
        # Ctrl-C during a slow import (or a plugin raising it): interrupted, said in one line.
        raise PluginError(f"{what} was interrupted while importing", 130) from exc
    except (Exception, SystemExit) as exc:
        # A broken plugin is the user's input: one line naming it, not a traceback. A
        # plugin calling sys.exit() at import would end fwbench without a word.
        raise PluginError(f"{what} failed to import: {one_line(exc)}") from exc
