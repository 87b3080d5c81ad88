"""The Llama family of decoders in Flax NNX (imported in a Flax worker only): transformers'
Llama, Mistral, Qwen 2 and 3, Gemma 1 to 3, Phi-3 and SmolLM3 causal LMs layer for layer
(RMSNorm, rotary positions as transformers rotates them, grouped-query attention, a
gated MLP), each with what its family adds to Llama's, as llama_family reads it from
the config, and read from the same safetensors weights that PyTorch's transformers and
Keras' keras-hub read (fwbench.models.sources.hf), so that its greedy tokens can be
compared with theirs.

Its cache and its calls are GPT-2's (flax_gpt.py): `forward(ids, start, cache,
last_only)` through a static key/value cache of the generation's length, so a
generation's prefill and decoding step are one compiled program each.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fwbench.models.flax_gpt import Decoder, LayerCache
from fwbench.models.llama_family import Config, Rope

_ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    "silu": jax.nn.silu,
    "gelu_pytorch_tanh": lambda x: jax.nn.gelu(x, approximate=True),
}


class RMSNorm(nnx.Module):
    def __init__(self, width: int, eps: float, gemma: bool = False) -> None:
        # Gemma's weight is an offset from 1, so it starts at 0.
        self.weight = nnx.Param(jnp.zeros((width,)) if gemma else jnp.ones((width,)))
        self.eps = eps
        self.gemma = gemma

    def __call__(self, x: Any) -> Any:
        # As transformers': the statistics in float32; Llama's weight applied in x's
        # dtype, Gemma's (1 + weight) in float32 before the cast.
        found = x.astype(jnp.float32)
        found = found * jax.lax.rsqrt(jnp.mean(found**2, axis=-1, keepdims=True) + self.eps)
        if self.gemma:
            return (found * (1.0 + self.weight[...].astype(jnp.float32))).astype(x.dtype)
        return self.weight[...].astype(x.dtype) * found.astype(x.dtype)


def _inverse_frequencies(rope: Rope, head: int) -> Any:
    """transformers' inverse frequencies of the rotary positions, unscaled, `linear`
    (divided by the factor) or `llama3` (the low frequencies divided by the factor, the
    middle ones interpolated)."""
    inverse = 1.0 / (rope.theta ** (jnp.arange(0, head, 2, dtype=jnp.float32) / head))
    if rope.kind == "linear":
        return inverse / rope.get("factor")
    if rope.kind != "llama3":
        return inverse
    factor, low, high = (
        rope.get("factor"),
        rope.get("low_freq_factor"),
        rope.get("high_freq_factor"),
    )
    context = rope.get("original_max_position_embeddings")
    wavelength = 2 * math.pi / inverse
    scaled = jnp.where(wavelength > context / low, inverse / factor, inverse)
    smooth = (context / wavelength - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    middle = (wavelength >= context / high) & (wavelength <= context / low)
    return jnp.where(middle, smoothed, scaled)


def _rotate(x: Any, positions: Any, rope: Rope) -> Any:
    """transformers' rotary embedding: the head's two halves rotated, frequency i of the
    first half paired with i of the second."""
    angles = positions.astype(jnp.float32)[:, None] * _inverse_frequencies(rope, x.shape[-1])
    angles = jnp.concatenate([angles, angles], axis=-1)  # (length, head)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    first, second = jnp.split(x, 2, axis=-1)
    return x * cos + jnp.concatenate([-second, first], axis=-1) * sin


def _linear(n_in: int, n_out: int, rngs: nnx.Rngs, bias: bool = False) -> nnx.Linear:
    return nnx.Linear(n_in, n_out, use_bias=bias, rngs=rngs)


class Attention(nnx.Module):
    def __init__(self, c: Config, index: int, rngs: nnx.Rngs) -> None:
        self.c = c
        self.window = c.windows[index] if c.windows else None
        self.rotary = c.rotary[index] if c.rotary else True
        self.rope = c.local_rope if self.window is not None and c.local_rope else c.rope
        self.q_proj = _linear(c.hidden, c.heads * c.head_dim, rngs, c.qkv_bias)
        self.k_proj = _linear(c.hidden, c.kv_heads * c.head_dim, rngs, c.qkv_bias)
        self.v_proj = _linear(c.hidden, c.kv_heads * c.head_dim, rngs, c.qkv_bias)
        self.o_proj = _linear(c.heads * c.head_dim, c.hidden, rngs, c.out_bias)
        self.q_norm = RMSNorm(c.head_dim, c.eps, c.gemma) if c.qk_norm else None
        self.k_norm = RMSNorm(c.head_dim, c.eps, c.gemma) if c.qk_norm else None

    def __call__(
        self, x: Any, start: Any = 0, cache: LayerCache | None = None
    ) -> tuple[Any, LayerCache | None]:
        c = self.c
        batch, length, _ = x.shape
        queries = start + jnp.arange(length)

        def heads(t: Any, n: int, norm: RMSNorm | None = None) -> Any:
            t = t.reshape(batch, length, n, c.head_dim)
            return (t if norm is None else norm(t)).transpose(0, 2, 1, 3)

        q = heads(self.q_proj(x), c.heads, self.q_norm)
        k = heads(self.k_proj(x), c.kv_heads, self.k_norm)
        if self.rotary:
            q, k = _rotate(q, queries, self.rope), _rotate(k, queries, self.rope)
        v = heads(self.v_proj(x), c.kv_heads)
        if cache is None:
            keys, values, known = k, v, queries
        else:
            at = (0, 0, start, 0)
            keys = jax.lax.dynamic_update_slice(cache[0], k.astype(cache[0].dtype), at)
            values = jax.lax.dynamic_update_slice(cache[1], v.astype(cache[1].dtype), at)
            cache, known = (keys, values), jnp.arange(keys.shape[2])
        groups = c.heads // c.kv_heads  # grouped-query attention: a key head per group
        keys, values = jnp.repeat(keys, groups, axis=1), jnp.repeat(values, groups, axis=1)
        scores = (q @ keys.transpose(0, 1, 3, 2)).astype(jnp.float32) * c.query_scale
        if c.attention_cap is not None:
            scores = _capped(scores, c.attention_cap)
        visible = known[None, :] <= queries[:, None]
        if self.window is not None:  # transformers' sliding window: the last `window`
            visible = visible & (known[None, :] > queries[:, None] - self.window)
        scores = jnp.where(visible, scores, np.finfo(np.float32).min)
        weights = jax.nn.softmax(scores, axis=-1).astype(values.dtype)
        out = (weights @ values).transpose(0, 2, 1, 3).reshape(batch, length, -1)
        return self.o_proj(out), cache


def _capped(x: Any, cap: float) -> Any:
    """Gemma 2's soft cap: tanh(x / cap) * cap."""
    return jnp.tanh(x / cap) * cap


class Layer(nnx.Module):
    def __init__(self, c: Config, index: int, rngs: nnx.Rngs) -> None:
        self.activation = c.activation
        self.input_layernorm = RMSNorm(c.hidden, c.eps, c.gemma)
        self.self_attn = Attention(c, index, rngs)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps, c.gemma)
        # Gemma 2 and 3 norm the attention's output, and the MLP's input and output.
        self.pre_feedforward_layernorm = RMSNorm(c.hidden, c.eps, c.gemma) if c.sandwich else None
        self.post_feedforward_layernorm = RMSNorm(c.hidden, c.eps, c.gemma) if c.sandwich else None
        self.gate_proj = _linear(c.hidden, c.intermediate, rngs, c.mlp_bias)
        self.up_proj = _linear(c.hidden, c.intermediate, rngs, c.mlp_bias)
        self.down_proj = _linear(c.intermediate, c.hidden, rngs, c.mlp_bias)

    def __call__(
        self, x: Any, start: Any = 0, cache: LayerCache | None = None
    ) -> tuple[Any, LayerCache | None]:
        attended, cache = self.self_attn(self.input_layernorm(x), start, cache)
        if self.pre_feedforward_layernorm is None:
            x = x + attended
            h = self.post_attention_layernorm(x)
        else:
            x = x + self.post_attention_layernorm(attended)
            h = self.pre_feedforward_layernorm(x)
        gate = _ACTIVATIONS[self.activation](self.gate_proj(h))
        out = self.down_proj(gate * self.up_proj(h))
        if self.post_feedforward_layernorm is not None:
            out = self.post_feedforward_layernorm(out)
        return x + out, cache


class Llama(Decoder):
    """Causal language model of the Llama family, called as flax_gpt.GPT2 is (Decoder)."""

    def __init__(self, c: Config, rngs: nnx.Rngs) -> None:
        self.c = c
        self.embed_tokens = nnx.Embed(c.vocab, c.hidden, rngs=rngs)
        self.layers = nnx.List([Layer(c, i, rngs) for i in range(c.layers)])
        self.norm = RMSNorm(c.hidden, c.eps, c.gemma)
        self.lm_head = None if c.tied else _linear(c.hidden, c.vocab, rngs)

    def embed(self, ids: Any, positions: Any) -> Any:
        x = self.embed_tokens(ids)  # positions enter as rotations, in the attention
        if self.c.gemma:  # in the embedding's dtype, as transformers scales it
            x = x * jnp.asarray(math.sqrt(self.c.hidden), x.dtype)
        return x

    def blocks(self) -> Any:
        return self.layers

    def head(self, x: Any) -> Any:
        x = self.norm(x)
        logits = self.embed_tokens.attend(x) if self.lm_head is None else self.lm_head(x)
        return logits if self.c.output_cap is None else _capped(logits, self.c.output_cap)

    def cache_shape(self, batch: int, length: int) -> tuple[int, ...]:
        return (batch, self.c.kv_heads, length, self.c.head_dim)


Placed = list[tuple[Any, np.ndarray]]


def _place(model: Llama, name: str, value: np.ndarray) -> Placed | None:
    """The parameters a transformers weight becomes, with their values (a Linear's
    weight is (out, in) there, (in, out) here; Phi-3's fused projections are split);
    None where the name has no place."""
    parts = name.removeprefix("model.").split(".")
    if parts == ["embed_tokens", "weight"]:
        return [(model.embed_tokens.embedding, value)]
    if parts == ["norm", "weight"]:
        return [(model.norm.weight, value)]
    if parts == ["lm_head", "weight"]:
        return None if model.lm_head is None else [(model.lm_head.kernel, value.T)]
    if len(parts) < 4 or parts[0] != "layers" or not parts[1].isdigit():
        return None
    if int(parts[1]) >= len(model.layers):
        return None
    layer = model.layers[int(parts[1])]
    *path, leaf = parts[2:]
    c, attention = model.c, layer.self_attn
    if path == ["self_attn", "qkv_proj"] and leaf == "weight":
        q, kv = c.heads * c.head_dim, c.kv_heads * c.head_dim
        splits = np.split(value.T, [q, q + kv], axis=1)
        fused = (attention.q_proj, attention.k_proj, attention.v_proj)
        return [(o.kernel, part) for o, part in zip(fused, splits, strict=True)]
    if path == ["mlp", "gate_up_proj"] and leaf == "weight":  # the gate first, as chunk(2)
        gate, up = np.split(value.T, 2, axis=1)
        return [(layer.gate_proj.kernel, gate), (layer.up_proj.kernel, up)]
    owners: dict[tuple[str, ...], Any] = {
        ("input_layernorm",): layer.input_layernorm,
        ("post_attention_layernorm",): layer.post_attention_layernorm,
        ("pre_feedforward_layernorm",): layer.pre_feedforward_layernorm,
        ("post_feedforward_layernorm",): layer.post_feedforward_layernorm,
        **{("self_attn", n): getattr(attention, n) for n in ("q_proj", "k_proj", "v_proj")},
        ("self_attn", "o_proj"): attention.o_proj,
        ("self_attn", "q_norm"): attention.q_norm,
        ("self_attn", "k_norm"): attention.k_norm,
        **{("mlp", n): getattr(layer, n) for n in ("gate_proj", "up_proj", "down_proj")},
    }
    owner = owners.get(tuple(path))
    if isinstance(owner, RMSNorm) and leaf == "weight":
        return [(owner.weight, value)]
    if isinstance(owner, nnx.Linear):
        if leaf == "weight":
            return [(owner.kernel, value.T)]
        if leaf == "bias" and owner.bias is not None:
            return [(owner.bias, value)]
    return None


def load(folder: Path) -> Llama:
    """The decoder of a transformers model folder (its config.json and safetensors):
    every weight placed, none missing, none left over (ValueError otherwise)."""
    import json

    from safetensors.flax import load_file  # bfloat16 too (a published size's weights)

    config = json.loads((folder / "config.json").read_text())
    model = Llama(Config.of(config), nnx.Rngs(0))
    kind = config["model_type"]
    placed: set[int] = set()
    from fwbench.models.sources.hf import weight_files

    for path in weight_files(folder):
        for name, stored in load_file(str(path)).items():
            found = _place(model, name, np.asarray(stored.astype(jnp.float32)))
            if found is None:
                if name == "lm_head.weight":  # tied: the embedding is the output layer
                    continue
                raise ValueError(f"weight {name} has no place in Flax's {kind} decoder")
            for param, array in found:
                shape = tuple(param.get_value().shape)
                if array.shape != shape:
                    raise ValueError(f"weight {name}: shape {array.shape}, the model's {shape}")
                param.set_value(jnp.asarray(array))
                placed.add(id(param))
    expected = len(jax.tree.leaves(nnx.state(model, nnx.Param)))
    if len(placed) != expected:
        raise ValueError(
            f"{len(placed)} of the decoder's {expected} weights were found in {folder}"
        )
    return model
