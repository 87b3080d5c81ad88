"""LoRA in PyTorch as keras-hub factorises it (task `lora`), so that PyTorch and the
Keras backends train the same adapters of the same weights.

keras-hub's `enable_lora` adapts the query and value layers. Most of its decoders
project with an EinsumDense whose kernel keeps the heads apart (hidden x heads x
head_dim): its adapter is A, hidden x heads x rank, and B, rank x head_dim, shared by the
heads. PEFT's LoRA on transformers' q_proj and v_proj factorises the whole projection
instead (A hidden x rank, B rank x heads*head_dim): another number of parameters (3,328
against 1,792 on a tiny Llama at rank 4), another model. `HeadLora` is keras-hub's
factorisation on a transformers Linear (with one head, the whole projection: keras-hub's
Dense layers, SmolLM3's). As in keras-hub, alpha is the rank (the update is A @ B
unscaled), A is He-uniform over its fans as Keras computes them, B starts at zero (the
adapted model computes the base model's logits), the adapters are float32, and the
adapted layer's bias, where it has one, trains too (keras-hub marks the whole layer
trainable and freezes its kernel alone).

Imported in a PyTorch worker only."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from fwbench.frameworks.base import LoraWorkload, TaskNotImplemented
from fwbench.frameworks.torch import TorchWorkload, count_trainable

# transformers' module names of keras-hub's LoRA targets, and the config's head count
# each projects to (grouped-query attention: fewer value heads).
TARGETS = {"q_proj": "num_attention_heads", "v_proj": "num_key_value_heads"}
# keras-hub decoders whose query and value are Dense layers: one factor each, whole.
WHOLE = frozenset({"smollm3"})
# transformers projects query, key and value with one matrix where keras-hub has two
# separate layers: no adapter of that matrix is keras-hub's.
FUSED = {"gpt2": "c_attn", "phi3": "qkv_proj"}


class HeadLora(nn.Module):
    """`base` (in -> heads x head_dim) plus keras-hub's low-rank update of it."""

    def __init__(self, base: nn.Linear, heads: int, rank: int) -> None:
        super().__init__()
        if base.out_features % heads:
            raise ValueError(f"{base.out_features} outputs do not split into {heads} heads")
        self.base = base
        self.heads = heads
        kw: dict[str, Any] = {"device": base.weight.device, "dtype": torch.float32}
        self.a = nn.Parameter(torch.empty(base.in_features, heads, rank, **kw))
        self.b = nn.Parameter(torch.zeros(rank, base.out_features // heads, **kw))
        # Keras' fans of a kernel of rank 3: its last two axes times the rest.
        bound = math.sqrt(6.0 / (base.in_features * heads))
        nn.init.uniform_(self.a, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.base(x)
        low = torch.einsum("...d,dnr->...nr", x.to(self.a.dtype), self.a)
        return out + (low @ self.b).flatten(-2).to(out.dtype)


def add_lora(model: nn.Module, rank: int) -> str:
    """Freeze `model` and adapt its query and value projections in place (see the
    module's docstring); what was adapted, in a line."""
    config: Any = getattr(model, "config")  # noqa: B009 (a transformers model's)
    kind = str(config.model_type)
    if kind in FUSED:
        raise TaskNotImplemented(
            f"task lora: transformers' {kind} projects query, key and value with one "
            f"matrix ({FUSED[kind]}) where keras-hub's has a layer each: no PyTorch "
            "adapter would be keras-hub's; the Keras backends run it"
        )
    model.requires_grad_(False)
    adapted = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if name not in TARGETS or not isinstance(child, nn.Linear):
                continue
            heads = 1 if kind in WHOLE else int(getattr(config, TARGETS[name]))
            if child.bias is not None:
                child.bias.requires_grad_(True)
            setattr(module, name, HeadLora(child, heads, rank))
            adapted += 1
    if not adapted:
        raise TaskNotImplemented(f"task lora: {kind} has no q_proj or v_proj projection to adapt")
    shape = "whole projections" if kind in WHOLE else "per head, B shared"
    return f"rank {rank} on {adapted} query and value projections ({shape}: keras-hub's)"


class TorchLora(LoraWorkload, TorchWorkload):
    """A training step of the adapted model: TorchWorkload's, on the adapters alone."""

    def count(self, model: Any) -> int:
        return count_trainable(model)

    def add_lora(self, model: Any, rank: int) -> str:
        return add_lora(model, rank)
