"""Framework adapters. Only the adapter modules import their framework, inside a worker."""

from __future__ import annotations

import importlib

from fwbench.catalog.frameworks import get_framework
from fwbench.frameworks.base import Adapter


def load_adapter(framework: str) -> Adapter:
    """The adapter of a registered framework: imports its module, and so the framework
    (in a worker only)."""
    module_name, _, class_name = get_framework(framework).adapter_path.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    adapter: Adapter = cls()
    return adapter
