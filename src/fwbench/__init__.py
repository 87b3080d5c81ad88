"""fwbench: benchmark deep learning frameworks against each other, fairly.

The public API, loaded on first use (importing fwbench imports no framework, and
nothing heavy):

    from fwbench import Case, RunOptions, ResultStore, run_cases, load_preset
"""

from __future__ import annotations

import importlib
from typing import Any

# The zoo, its builders and the model sources register in the catalog first, before any
# plugin and whatever is imported next (fwbench.models: no framework is imported).
import fwbench.models  # noqa: F401

_EXPORTS = {
    "Case": "fwbench.case",
    "Result": "fwbench.result",
    "RunOptions": "fwbench.api",
    "run_cases": "fwbench.api",
    "ResultStore": "fwbench.store.db",
    "TimingConfig": "fwbench.measure.settings",
    "load_file": "fwbench.sweep",
    "load_preset": "fwbench.sweep",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fwbench' has no attribute {name!r}")
