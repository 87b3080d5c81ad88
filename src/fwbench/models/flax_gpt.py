"""GPT-2 in Flax NNX (imported in a Flax worker only): transformers' GPT2LMHeadModel layer
for layer (learned positions, pre-norm blocks, fused query/key/value projection, GELU's
tanh approximation, dropout on embeddings, attention weights and residuals, the output
layer tied to the token embedding), with the same trainable parameters, so that it
loads the weights every framework generates from (fwbench.models.gpt_weights, in
transformers' names) and its greedy tokens can be compared with PyTorch's.

A generation runs through a static key/value cache: arrays of the whole generation's
length, written at each step's position with `dynamic_update_slice`, every position after
the one being computed masked out. Every step has the same shapes, so the prefill and the
decoding step are one compiled program each (fwbench.frameworks.flax_nnx.FlaxGenerate).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fwbench.models import shapes

# One layer's keys and values, each (batch, heads, positions, head width).
LayerCache = tuple[Any, Any]


class Attention(nnx.Module):
    def __init__(self, width: int, heads: int, rngs: nnx.Rngs) -> None:
        self.heads = heads
        self.c_attn = nnx.Linear(width, 3 * width, rngs=rngs)
        self.c_proj = nnx.Linear(width, width, rngs=rngs)
        self.attn_dropout = nnx.Dropout(shapes.DROPOUT, rngs=rngs)
        self.resid_dropout = nnx.Dropout(shapes.DROPOUT, rngs=rngs)

    def __call__(
        self, x: Any, start: Any = 0, cache: LayerCache | None = None
    ) -> tuple[Any, LayerCache | None]:
        batch, length, width = x.shape
        head = width // self.heads

        def split(t: Any) -> Any:
            return t.reshape(batch, length, self.heads, head).transpose(0, 2, 1, 3)

        q, k, v = (split(t) for t in jnp.split(self.c_attn(x), 3, axis=-1))
        queries = start + jnp.arange(length)
        if cache is None:
            keys, values, known = k, v, jnp.arange(length)
        else:
            at = (0, 0, start, 0)
            keys = jax.lax.dynamic_update_slice(cache[0], k.astype(cache[0].dtype), at)
            values = jax.lax.dynamic_update_slice(cache[1], v.astype(cache[1].dtype), at)
            cache, known = (keys, values), jnp.arange(keys.shape[2])
        scores = (q @ keys.transpose(0, 1, 3, 2)).astype(jnp.float32) / math.sqrt(head)
        # Causal: a position sees itself and those before it; the cache's later positions
        # (not written yet in this generation) are masked with them.
        visible = known[None, :] <= queries[:, None]
        scores = jnp.where(visible, scores, np.finfo(np.float32).min)
        weights = self.attn_dropout(jax.nn.softmax(scores, axis=-1).astype(v.dtype))
        out = (weights @ values).transpose(0, 2, 1, 3).reshape(batch, length, width)
        return self.resid_dropout(self.c_proj(out)), cache


class Block(nnx.Module):
    def __init__(self, width: int, heads: int, rngs: nnx.Rngs) -> None:
        self.ln_1 = nnx.LayerNorm(width, epsilon=shapes.LN_EPS, rngs=rngs)
        self.attn = Attention(width, heads, rngs)
        self.ln_2 = nnx.LayerNorm(width, epsilon=shapes.LN_EPS, rngs=rngs)
        self.c_fc = nnx.Linear(width, 4 * width, rngs=rngs)
        self.c_proj = nnx.Linear(4 * width, width, rngs=rngs)
        self.dropout = nnx.Dropout(shapes.DROPOUT, rngs=rngs)

    def __call__(
        self, x: Any, start: Any = 0, cache: LayerCache | None = None
    ) -> tuple[Any, LayerCache | None]:
        attended, cache = self.attn(self.ln_1(x), start, cache)
        x = x + attended
        hidden = jax.nn.gelu(self.c_fc(self.ln_2(x)), approximate=True)  # gelu_new
        return x + self.dropout(self.c_proj(hidden)), cache


class Decoder(nnx.Module):
    """What a causal decoder here is called through (GPT-2's, and flax_llama's): on ids,
    the logits at every position; `forward` with a cache, a generation's prefill or
    decoding step; `empty_cache`, the static cache of a generation's length. A decoder
    gives its embedding, its blocks, its output head and its cache's shape."""

    def embed(self, ids: Any, positions: Any) -> Any:
        raise NotImplementedError

    def blocks(self) -> Any:
        raise NotImplementedError

    def head(self, x: Any) -> Any:
        """The final norm and the logits over the vocabulary."""
        raise NotImplementedError

    def cache_shape(self, batch: int, length: int) -> tuple[int, ...]:
        raise NotImplementedError

    def __call__(self, ids: Any) -> Any:
        logits, _ = self.forward(ids)
        return logits

    def forward(
        self,
        ids: Any,
        start: Any = 0,
        cache: tuple[LayerCache, ...] | None = None,
        last_only: bool = False,
    ) -> tuple[Any, tuple[LayerCache, ...] | None]:
        """The logits of `ids` (batch, length) placed at `start`, through `cache` where
        given (written at their positions, returned); `last_only`: of the last position
        only, as a generation needs (transformers' generate() asks the same)."""
        x = self.embed(ids, start + jnp.arange(ids.shape[1]))
        written: list[LayerCache] = []
        for i, block in enumerate(self.blocks()):
            x, layer = block(x, start, None if cache is None else cache[i])
            if layer is not None:
                written.append(layer)
        logits = self.head(x[:, -1:] if last_only else x)
        return logits, (tuple(written) if cache is not None else None)

    def empty_cache(self, batch: int, length: int, dtype: Any) -> tuple[LayerCache, ...]:
        shape = self.cache_shape(batch, length)
        return tuple((jnp.zeros(shape, dtype), jnp.zeros(shape, dtype)) for _ in self.blocks())


class GPT2(Decoder):
    """GPT-2's decoder: learned positions, its blocks, the output tied to the tokens."""

    def __init__(self, name: str, seq_len: int, vocab_size: int, rngs: nnx.Rngs) -> None:
        size = shapes.GPT2[name]
        width = size["width"]
        # Positions beyond the model's context get a longer table, as in PyTorch's twin.
        positions = max(size["positions"], seq_len)
        self.heads, self.width = size["heads"], width
        self.wte = nnx.Embed(vocab_size, width, rngs=rngs)
        self.wpe = nnx.Embed(positions, width, rngs=rngs)
        self.drop = nnx.Dropout(shapes.DROPOUT, rngs=rngs)
        self.h = nnx.List([Block(width, size["heads"], rngs) for _ in range(size["layers"])])
        self.ln_f = nnx.LayerNorm(width, epsilon=shapes.LN_EPS, rngs=rngs)

    def embed(self, ids: Any, positions: Any) -> Any:
        return self.drop(self.wte(ids) + self.wpe(positions)[None])

    def blocks(self) -> Any:
        return self.h

    def head(self, x: Any) -> Any:
        return self.wte.attend(self.ln_f(x))

    def cache_shape(self, batch: int, length: int) -> tuple[int, ...]:
        return (batch, self.heads, length, self.width // self.heads)


# transformers' names (gpt_weights) -> this model's parameters, by path below a block or
# the model; GPT-2's Conv1D stores a projection as (in, out), as nnx.Linear's kernel.
_BLOCK = {
    "ln_1.weight": ("ln_1", "scale"),
    "ln_1.bias": ("ln_1", "bias"),
    "ln_2.weight": ("ln_2", "scale"),
    "ln_2.bias": ("ln_2", "bias"),
    "attn.c_attn.weight": ("attn", "c_attn", "kernel"),
    "attn.c_attn.bias": ("attn", "c_attn", "bias"),
    "attn.c_proj.weight": ("attn", "c_proj", "kernel"),
    "attn.c_proj.bias": ("attn", "c_proj", "bias"),
    "mlp.c_fc.weight": ("c_fc", "kernel"),
    "mlp.c_fc.bias": ("c_fc", "bias"),
    "mlp.c_proj.weight": ("c_proj", "kernel"),
    "mlp.c_proj.bias": ("c_proj", "bias"),
}
_TOP = {
    "transformer.wte.weight": ("wte", "embedding"),
    "transformer.wpe.weight": ("wpe", "embedding"),
    "transformer.ln_f.weight": ("ln_f", "scale"),
    "transformer.ln_f.bias": ("ln_f", "bias"),
}


def load_weights(model: GPT2, weights: Mapping[str, np.ndarray]) -> None:
    """Take the weights of gpt_weights (transformers' names) as the model's, every one of
    them and nothing else; the output layer stays the token embedding (tied)."""
    taken = set()
    for name, value in weights.items():
        path: tuple[str, ...] | None = _TOP.get(name)
        owner: Any = model
        if path is None and name.startswith("transformer.h."):
            index, _, rest = name.removeprefix("transformer.h.").partition(".")
            path, owner = _BLOCK.get(rest), model.h[int(index)]
        if path is None:
            raise ValueError(f"GPT-2 weight {name} has no place in the Flax model")
        *parents, leaf = path
        for part in parents:
            owner = getattr(owner, part)
        param = getattr(owner, leaf)
        shape = tuple(param.get_value().shape)
        if shape != value.shape:
            raise ValueError(f"GPT-2 weight {name}: shape {value.shape}, model {shape}")
        param.set_value(jnp.asarray(value))
        taken.add(name)
    expected = len(jax.tree.leaves(nnx.state(model, nnx.Param)))
    if len(taken) != expected:
        raise ValueError(f"GPT-2 weights do not fit: {len(taken)} given, the model has {expected}")


def gpt2(name: str, seq_len: int, vocab_size: int, seed: int = 0) -> GPT2:
    return GPT2(name, seq_len, vocab_size, nnx.Rngs(seed))
