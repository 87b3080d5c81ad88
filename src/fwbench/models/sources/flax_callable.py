"""A Flax NNX model made by the user's function: `flax:module:function` or
`flax:path/file.py:function`, a function that takes no arguments and returns an
`nnx.Module` (its parameters initialised by the function, from its own `nnx.Rngs`).

The function's module file, and the modules beside it that it imports, are hashed for
the model's name. A module does not declare its inputs: `--input-shape` gives them."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import ModelSpec
from fwbench.models.sources.common import (
    call,
    callable_model,
    callable_parts,
)

PREFIX = "flax"


def claims(text: str) -> bool:
    return text.startswith(f"{PREFIX}:")


def trainable(model: Any) -> int:
    """An NNX module's trainable parameters (its `nnx.Param` leaves)."""
    import jax
    from flax import nnx

    return int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))


def build(text: str) -> Any:
    """The module the function returns (in a Flax worker: imports Flax through it)."""
    from flax import nnx

    module, function = callable_parts(text, PREFIX)
    found = call(module, function, text)
    if not isinstance(found, nnx.Module):
        raise TypeError(f"{text} returned a {type(found).__name__}, not a flax.nnx.Module")
    return found


def resolve(text: str) -> ModelSpec:
    return callable_model(text, PREFIX, {"flax": build}, family="flax")


def describe(spec: ModelSpec) -> dict[str, Any]:
    return {"inputs": "", "params": trainable(build(spec.reference)), "outputs": ""}
