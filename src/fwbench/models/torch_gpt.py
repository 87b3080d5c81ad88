"""PyTorch GPT-2 (imported in workers only): transformers' GPT2LMHeadModel built from a
config (random weights, nothing downloaded); the Keras backends build keras-hub's GPT-2 at the
same dimensions (keras_hub_lm.py), Flax fwbench's NNX one (flax_gpt.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from fwbench.models import shapes


class GPT2(nn.Module):
    """Causal language model: returns the logits over the vocabulary at every position."""

    def __init__(self, name: str, seq_len: int, vocab_size: int) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        size = shapes.GPT2[name]
        config = GPT2Config(
            vocab_size=vocab_size,
            # Positions beyond the model's context get a longer table, as BERT's do.
            n_positions=max(size["positions"], seq_len),
            n_embd=size["width"],
            n_layer=size["layers"],
            n_head=size["heads"],
            activation_function="gelu_new",  # GELU's tanh approximation, as GPT-2's
            resid_pdrop=shapes.DROPOUT,
            embd_pdrop=shapes.DROPOUT,
            attn_pdrop=shapes.DROPOUT,
            layer_norm_epsilon=shapes.LN_EPS,
            tie_word_embeddings=True,
            # GPT-2's end-of-text token, inside a small test vocabulary too.
            bos_token_id=min(50256, vocab_size - 1),
            eos_token_id=min(50256, vocab_size - 1),
        )
        self.gpt = GPT2LMHeadModel(config)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # No cache: a training step or a prefill over the whole sequence keeps none.
        out: torch.Tensor = self.gpt(input_ids=ids, use_cache=False).logits
        return out


def load_weights(model: GPT2, weights: Mapping[str, np.ndarray]) -> None:
    """Take the weights of gpt_weights (transformers' own names) as the model's; the output
    layer stays the token embedding (tied)."""
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in weights.items()}
    missing, unexpected = model.gpt.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise ValueError(f"GPT-2 weights do not fit: missing {missing}, unexpected {unexpected}")
    if model.gpt.lm_head.weight is not model.gpt.transformer.wte.weight:
        raise ValueError("GPT-2's output layer is no longer its token embedding")


def build(name: str, **dims: Any) -> nn.Module:
    return GPT2(name, dims["seq_len"], dims["vocab_size"])
