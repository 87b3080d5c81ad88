"""A PyTorch model made by the user's function: `torch:module:function` or
`torch:path/file.py:function`, a function that takes no arguments and returns an
`nn.Module` (with its weights: random, or loaded by the function itself).

The function's module file is hashed for the model's name. A module does not declare
its inputs: `--input-shape` gives them."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import TENSORS, ModelSpec
from fwbench.catalog.sources import Source, register_source
from fwbench.models.sources.common import call, callable_parts, digest, module_file, named
from fwbench.models.sources.torch_common import CANNOT_TORCH, RUNS_TORCH

PREFIX = "torch"


def _claims(text: str) -> bool:
    return text.startswith(f"{PREFIX}:")


def build(text: str) -> Any:
    """The module the function returns (in a worker: imports torch through it)."""
    import torch

    from fwbench.models.sources.torch_common import check_module

    module, function = callable_parts(text, PREFIX)
    torch.manual_seed(0)  # random weights the same in every worker
    return check_module(call(module, function, text), text)


def _resolve(text: str) -> ModelSpec:
    module, function = callable_parts(text, PREFIX)
    path = module_file(module, text)
    content = digest(path)
    reference = f"{PREFIX}:{path}:{function}" if module.endswith(".py") else text
    return ModelSpec(
        name=named(f"{path.stem}.{function}", content),
        family="pytorch",
        input_kind=TENSORS,
        builders={"torch": lambda **_: build(reference)},
        description=f"{function}() of {path}",
        objective="mean",
        source=SOURCE.name,
        reference=reference,
        digest=content,
    )


def _describe(spec: ModelSpec) -> dict[str, Any]:
    from fwbench.models.sources.torch_common import trainable

    found = build(spec.reference)
    return {"inputs": "", "params": trainable(found), "outputs": ""}


SOURCE = register_source(
    Source(
        name="torch_callable",
        label="a PyTorch module from a function",
        syntax="torch:module:function",
        example="torch:nets.py:build",
        claims=_claims,
        resolve=_resolve,
        native="torch",
        runs=RUNS_TORCH,
        cannot=CANNOT_TORCH,
        describe=_describe,
    )
)
