"""Model registry: name -> ModelSpec, readable without importing any framework.

Builders import their framework inside the function body, so registering a model never
loads a framework. Users add models with a module that calls `register(...)`, found
through the `fwbench.models` entry-point group or the FWBENCH_PLUGINS environment
variable (comma-separated module names), see docs/adding-a-model.md.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from fwbench.errors import SpecError

# (num_classes, input_size) -> a framework-native model object.
Builder = Callable[[int, int], Any]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    input_kind: str
    default_input_size: int
    min_input_size: int
    builders: dict[str, Builder] = field(repr=False)
    description: str = ""

    def builder(self, framework: str) -> Builder:
        try:
            return self.builders[framework]
        except KeyError:
            raise SpecError(
                f"model {self.name!r} has no {framework} implementation; "
                f"it has: {', '.join(sorted(self.builders))}"
            ) from None


_MODELS: dict[str, ModelSpec] = {}
_loaded = False


def register(spec: ModelSpec) -> ModelSpec:
    _MODELS[spec.name] = spec
    return spec


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    importlib.import_module("fwbench.models.vision")
    for ep in entry_points(group="fwbench.models"):
        ep.load()
    for module in filter(None, os.environ.get("FWBENCH_PLUGINS", "").split(",")):
        importlib.import_module(module.strip())


def all_models() -> dict[str, ModelSpec]:
    _load()
    return dict(_MODELS)


def get_model(name: str) -> ModelSpec:
    models = all_models()
    key = name.lower()
    if key not in models:
        raise SpecError(f"unknown model {name!r}; valid choices: {', '.join(sorted(models))}")
    return models[key]
