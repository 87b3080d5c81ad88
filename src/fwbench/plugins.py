"""Loading user plugins: modules that register models or frameworks.

A plugin is a module that calls `fwbench.models.registry.register(...)`,
`fwbench.frameworks.registry.register_framework(...)`,
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

from fwbench.errors import SpecError

GROUPS = ("fwbench.frameworks", "fwbench.models", "fwbench.trackers", "fwbench.tasks")
ENV = "FWBENCH_PLUGINS"

_loaded = False


def names() -> list[str]:
    """The modules FWBENCH_PLUGINS names."""
    return [m.strip() for m in os.environ.get(ENV, "").split(",") if m.strip()]


def load() -> None:
    global _loaded
    if _loaded:
        return
    # Set first: a plugin imports the registries, which call back here.
    _loaded = True
    for group in GROUPS:
        for ep in entry_points(group=group):
            _import(f"entry point {ep.name!r} ({group})", ep.load)
    for module in names():
        _import(f"{ENV} module {module!r}", functools.partial(importlib.import_module, module))


def _import(what: str, do: Callable[[], object]) -> None:
    try:
        do()
    except SpecError:
        raise
    except Exception as exc:
        # A broken plugin is the user's input: one line naming it, not a traceback.
        raise SpecError(f"{what} failed to load: {type(exc).__name__}: {exc}") from exc
