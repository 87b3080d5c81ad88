"""Keras 3 GPT-2 (imported in workers only), written layer for layer after transformers'
GPT2LMHeadModel (torch_gpt.py): learned positions, pre-norm blocks, one fused q/k/v
projection, GELU's tanh approximation, a final norm, and logits through the transposed
token embedding (tied, so counted once). It runs on every Keras backend (TensorFlow,
JAX, PyTorch)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import keras
import numpy as np
from keras import layers, ops

from fwbench.models import gpt_weights, shapes


class CausalSelfAttention(layers.Layer):  # type: ignore[misc]
    """GPT-2's attention: q, k, v from one projection (c_attn), scaled dot products under
    a causal mask, dropout on the weights (attn_pdrop), an output projection (c_proj)."""

    def __init__(self, width: int, heads: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.heads, self.head_dim = heads, width // heads
        self.c_attn = layers.Dense(3 * width, name="c_attn")
        self.c_proj = layers.Dense(width, name="c_proj")
        self.attn_dropout = layers.Dropout(shapes.DROPOUT)

    def call(self, x: Any, training: bool | None = None) -> Any:
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        qkv = ops.reshape(self.c_attn(x), (batch, length, 3, self.heads, self.head_dim))
        # (batch, heads, length, head_dim) each
        q, k, v = (ops.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))
        scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2))) / math.sqrt(self.head_dim)
        causal = ops.tril(ops.ones((length, length), dtype="bool"))
        scores = ops.where(causal[None, None], scores, ops.cast(-1e9, scores.dtype))
        weights = self.attn_dropout(ops.softmax(scores, axis=-1), training=training)
        out = ops.transpose(ops.matmul(weights, v), (0, 2, 1, 3))
        return self.c_proj(ops.reshape(out, (batch, length, self.heads * self.head_dim)))

    def cached(self, x: Any, cache: tuple[Any, Any], start: Any) -> tuple[Any, tuple[Any, Any]]:
        """Inference over positions start.. of `x`, through a static key/value cache:
        this layer's keys and values, (batch, heads, context, head_dim) each, allocated
        once for the whole generation. The new keys and values are written in place at
        `start` (a tensor, so one trace serves every position), and each query attends
        to the cache's positions up to its own; the rest are masked as the causal mask
        does, so the result is the uncached attention's."""
        batch, length = ops.shape(x)[0], ops.shape(x)[1]
        qkv = ops.reshape(self.c_attn(x), (batch, length, 3, self.heads, self.head_dim))
        q, k, v = (ops.transpose(qkv[:, :, i], (0, 2, 1, 3)) for i in range(3))
        zero = ops.zeros((), dtype="int32")
        at = (zero, zero, ops.cast(start, "int32"), zero)
        keys = ops.slice_update(cache[0], at, ops.cast(k, cache[0].dtype))
        values = ops.slice_update(cache[1], at, ops.cast(v, cache[1].dtype))
        scores = ops.matmul(q, ops.transpose(keys, (0, 1, 3, 2))) / math.sqrt(self.head_dim)
        seen = ops.arange(ops.shape(keys)[2])[None, :] <= (start + ops.arange(length))[:, None]
        scores = ops.where(seen[None, None], scores, ops.cast(-1e9, scores.dtype))
        out = ops.transpose(ops.matmul(ops.softmax(scores, axis=-1), values), (0, 2, 1, 3))
        out = self.c_proj(ops.reshape(out, (batch, length, self.heads * self.head_dim)))
        return out, (keys, values)


class Block(layers.Layer):  # type: ignore[misc]
    """Pre-norm: x + attn(ln_1(x)), then x + mlp(ln_2(x)), each with residual dropout."""

    def __init__(self, width: int, heads: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ln_1 = layers.LayerNormalization(epsilon=shapes.LN_EPS, name="ln_1")
        self.attn = CausalSelfAttention(width, heads, name="attn")
        self.ln_2 = layers.LayerNormalization(epsilon=shapes.LN_EPS, name="ln_2")
        self.c_fc = layers.Dense(4 * width, name="c_fc")
        self.c_proj = layers.Dense(width, name="c_proj")
        self.dropout = layers.Dropout(shapes.DROPOUT)

    def call(self, x: Any, training: bool | None = None) -> Any:
        x = x + self.dropout(self.attn(self.ln_1(x), training=training), training=training)
        h = keras.activations.gelu(self.c_fc(self.ln_2(x)), approximate=True)
        return x + self.dropout(self.c_proj(h), training=training)

    def cached(self, x: Any, cache: tuple[Any, Any], start: Any) -> tuple[Any, tuple[Any, Any]]:
        attended, cache = self.attn.cached(self.ln_1(x), cache, start)
        x = x + attended
        h = keras.activations.gelu(self.c_fc(self.ln_2(x)), approximate=True)
        return x + self.c_proj(h), cache


class GPT2(keras.Model):  # type: ignore[misc]
    def __init__(self, name: str, seq_len: int, vocab_size: int, **kwargs: Any) -> None:
        super().__init__(name=name, **kwargs)
        size = shapes.GPT2[name]
        width = size["width"]
        self.wte = layers.Embedding(vocab_size, width, name="wte")
        self.wpe = layers.Embedding(max(size["positions"], seq_len), width, name="wpe")
        self.drop = layers.Dropout(shapes.DROPOUT)
        self.blocks = [Block(width, size["heads"], name=f"h{i}") for i in range(size["layers"])]
        self.ln_f = layers.LayerNormalization(epsilon=shapes.LN_EPS, name="ln_f")

    def call(self, ids: Any, training: bool | None = None) -> Any:
        positions = ops.arange(ops.shape(ids)[1])[None, :]
        x = self.drop(self.wte(ids) + self.wpe(positions), training=training)
        for block in self.blocks:
            x = block(x, training=training)
        # The output layer is the token embedding, transposed (tied weights).
        return ops.matmul(self.ln_f(x), ops.transpose(self.wte.embeddings))

    def empty_cache(self, batch: int, context: int) -> list[tuple[Any, Any]]:
        """A static key/value cache for `context` positions: zeros, one (keys, values)
        pair per block, each (batch, heads, context, head_dim)."""
        attn = self.blocks[0].attn
        shape = (batch, attn.heads, context, attn.head_dim)
        dtype = self.compute_dtype
        return [(ops.zeros(shape, dtype), ops.zeros(shape, dtype)) for _ in self.blocks]

    def next_token(
        self, ids: Any, cache: list[tuple[Any, Any]], start: Any
    ) -> tuple[Any, list[tuple[Any, Any]]]:
        """Greedy decoding through the cache: `ids` (batch, length) at positions start..,
        their keys and values written to `cache`; returns the next token after the last
        position (batch,) int32 and the cache. Inference only: no dropout."""
        positions = start + ops.arange(ops.shape(ids)[1])[None, :]
        x = self.wte(ids) + self.wpe(positions)
        found = []
        for block, layer_cache in zip(self.blocks, cache, strict=True):
            x, layer_cache = block.cached(x, layer_cache, start)
            found.append(layer_cache)
        logits = ops.matmul(self.ln_f(x[:, -1]), ops.transpose(self.wte.embeddings))
        return ops.cast(ops.argmax(logits, axis=-1), "int32"), found


def _variable(model: GPT2, path: str) -> Any:
    """The weight at `path` of gpt_weights.keras_name: `h3/attn/c_attn/kernel`."""
    *layers_on_path, variable = path.split("/")
    found: Any = model
    for part in layers_on_path:
        block = re.fullmatch(r"h(\d+)", part)
        found = model.blocks[int(block.group(1))] if block else getattr(found, part)
    return getattr(found, variable)


def load_weights(model: GPT2, weights: Mapping[str, np.ndarray]) -> None:
    """Take the weights of gpt_weights (transformers' names, mapped by keras_name), every
    one of the model's."""
    assigned = set()
    for name, value in weights.items():
        variable = _variable(model, gpt_weights.keras_name(name))
        if tuple(variable.shape) != value.shape:
            raise ValueError(f"{name}: shape {value.shape}, the Keras weight's {variable.shape}")
        variable.assign(value)
        assigned.add(id(variable))
    left = [w.path for w in model.weights if id(w) not in assigned]
    if left:
        raise ValueError(f"GPT-2 weights left unset: {', '.join(left)}")


def build(name: str, **dims: Any) -> keras.Model:
    model = GPT2(name, dims["seq_len"], dims["vocab_size"])
    model(np.zeros((1, 1), dtype="int32"))  # creates the weights: counted before a step
    return model
