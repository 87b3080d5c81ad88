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

Where transformers projects query, key and value with one matrix and keras-hub with a
layer each (GPT-2's `c_attn`, Phi-3's `qkv_proj`), `FusedLora` adapts the query's and
the value's outputs of that matrix as keras-hub adapts its two layers: the same factors,
and the query's and value's biases (GPT-2's) trained, the key's frozen.

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
# transformers' one matrix of query, key and value (the query's outputs first, the
# value's last), where keras-hub has a layer each.
FUSED = {"gpt2": "c_attn", "phi3": "qkv_proj"}


class Update(nn.Module):
    """keras-hub's low-rank update of a projection to heads x width: x A B, A of in x
    heads x rank (He-uniform over Keras' fans of a kernel of rank 3: its last two axes
    times the rest), B of rank x width shared by the heads (zero at first), float32."""

    def __init__(
        self, in_features: int, heads: int, width: int, rank: int, device: torch.device
    ) -> None:
        super().__init__()
        kw: dict[str, Any] = {"device": device, "dtype": torch.float32}
        self.a = nn.Parameter(torch.empty(in_features, heads, rank, **kw))
        self.b = nn.Parameter(torch.zeros(rank, width, **kw))
        bound = math.sqrt(6.0 / (in_features * heads))
        nn.init.uniform_(self.a, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low = torch.einsum("...d,dnr->...nr", x.to(self.a.dtype), self.a)
        return (low @ self.b).flatten(-2)


class HeadLora(nn.Module):
    """`base` (in -> heads x head_dim) plus keras-hub's low-rank update of it."""

    def __init__(self, base: nn.Linear, heads: int, rank: int) -> None:
        super().__init__()
        if base.out_features % heads:
            raise ValueError(f"{base.out_features} outputs do not split into {heads} heads")
        self.base = base
        width = base.out_features // heads
        self.update = Update(base.in_features, heads, width, rank, base.weight.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.base(x)
        update: torch.Tensor = self.update(x)
        return out + update.to(out.dtype)


class FusedLora(nn.Module):
    """`base`, one projection to the query's, the key's and the value's outputs (in that
    order), plus keras-hub's updates of the query and the value as if each were a layer
    of its own. Where `base` has a bias, the query's and value's parts of it move into
    parameters of their own, which train (as keras-hub's layers' biases do); the key's
    stays in `base`, frozen."""

    def __init__(
        self, base: nn.Module, in_features: int, heads: tuple[int, int], width: int, rank: int
    ) -> None:
        super().__init__()
        weight = base.weight
        assert isinstance(weight, torch.Tensor)
        outputs = weight.numel() // in_features
        query, value = heads[0] * width, heads[1] * width
        if outputs <= query + value:
            raise ValueError(f"{outputs} outputs do not hold a query, a key and a value")
        self.base = base
        self.split = [query, outputs - query - value, value]
        self.q = Update(in_features, heads[0], width, rank, weight.device)
        self.v = Update(in_features, heads[1], width, rank, weight.device)
        bias = getattr(base, "bias", None)
        self.q_bias: nn.Parameter | None = None
        self.v_bias: nn.Parameter | None = None
        if isinstance(bias, torch.Tensor):
            with torch.no_grad():
                self.q_bias = nn.Parameter(bias[:query].clone())
                self.v_bias = nn.Parameter(bias[outputs - value :].clone())
                bias[:query] = 0
                bias[outputs - value :] = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.base(x)
        q, k, v = torch.split(out, self.split, dim=-1)
        dq: torch.Tensor = self.q(x)
        dv: torch.Tensor = self.v(x)
        q, v = q + dq.to(out.dtype), v + dv.to(out.dtype)
        if self.q_bias is not None and self.v_bias is not None:
            q, v = q + self.q_bias.to(out.dtype), v + self.v_bias.to(out.dtype)
        return torch.cat([q, k, v], dim=-1)


def _fused(model: nn.Module, config: Any, name: str, rank: int) -> int:
    """Adapt every projection `name` of `model` in place; how many query and value
    projections that adapted."""
    heads = int(config.num_attention_heads)
    kv = int(getattr(config, "num_key_value_heads", None) or heads)
    width = int(config.hidden_size) // heads
    adapted = 0
    for module in list(model.modules()):
        child = getattr(module, name, None)
        if not isinstance(child, nn.Module) or isinstance(child, FusedLora):
            continue
        # A Linear stores out x in; GPT-2's Conv1D in x out.
        weight = child.weight
        assert isinstance(weight, torch.Tensor)
        in_features = child.in_features if isinstance(child, nn.Linear) else weight.shape[0]
        setattr(module, name, FusedLora(child, int(in_features), (heads, kv), width, rank))
        adapted += 2
    return adapted


def add_lora(model: nn.Module, rank: int) -> str:
    """Freeze `model` and adapt its query and value projections in place (see the
    module's docstring); what was adapted, in a line."""
    config: Any = getattr(model, "config")  # noqa: B009 (a transformers model's)
    kind = str(config.model_type)
    model.requires_grad_(False)
    if kind in FUSED:
        adapted = _fused(model, config, FUSED[kind], rank)
        if not adapted:
            raise TaskNotImplemented(f"task lora: {kind} has no {FUSED[kind]} projection")
        return (
            f"rank {rank} on {adapted} query and value projections (per head, B shared: "
            f"keras-hub's, on the query's and value's outputs of {FUSED[kind]})"
        )
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
