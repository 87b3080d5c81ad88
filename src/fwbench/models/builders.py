"""What the frameworks' builder tables share: a builder of a twin fwbench writes itself,
which imports its module in the worker when it is called (by name: the command's
process registers the table and imports no framework)."""

from __future__ import annotations

import importlib
from typing import Any

from fwbench.catalog.models import Builder


def twin(module: str, name: str) -> Builder:
    """`fwbench.models.<module>.build(name, **dims)`, imported when called."""

    def build(**dims: int) -> Any:
        return importlib.import_module(f"fwbench.models.{module}").build(name, **dims)

    return build
