"""A PyTorch model made by the user's function: `torch:module:function` or
`torch:path/file.py:function`, a function that takes no arguments and returns an
`nn.Module` (with its weights: random, or loaded by the function itself).

The function's module file is hashed for the model's name. A module does not declare
its inputs: `--input-shape` gives them."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import ModelSpec
from fwbench.models.sources.common import (
    call,
    callable_model,
    callable_parts,
)

PREFIX = "torch"


def claims(text: str) -> bool:
    return text.startswith(f"{PREFIX}:")


def build(text: str) -> Any:
    """The module the function returns (in a worker: imports torch through it)."""
    import torch

    from fwbench.models.sources.torch_common import check_module

    module, function = callable_parts(text, PREFIX)
    torch.manual_seed(0)  # random weights the same in every worker
    return check_module(call(module, function, text), text)


def resolve(text: str) -> ModelSpec:
    return callable_model(text, PREFIX, {"torch": build}, family="pytorch")


def describe(spec: ModelSpec) -> dict[str, Any]:
    from fwbench.models.sources.torch_common import trainable

    found = build(spec.reference)
    return {"inputs": "", "params": trainable(found), "outputs": ""}
