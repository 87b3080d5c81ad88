"""A Llama-type decoder in Flax NNX (imported in a Flax worker only): transformers'
LlamaForCausalLM layer for layer (RMSNorm, rotary positions as transformers rotates
them, grouped-query attention, SwiGLU), read from the same safetensors weights that
PyTorch's transformers and Keras' keras-hub read (fwbench.models.sources.hf), so that
its greedy tokens can be compared with theirs.

Its cache and its calls are GPT-2's (flax_gpt.py): `forward(ids, start, cache,
last_only)` through a static key/value cache of the generation's length, so a
generation's prefill and decoding step are one compiled program each. Configurations
it does not reproduce (rotary scaling, biases, a sliding window) are refused with the
reason, not run differently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fwbench.models.flax_gpt import Decoder, LayerCache


@dataclass(frozen=True)
class Config:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    eps: float
    theta: float
    tied: bool

    @classmethod
    def of(cls, config: dict[str, Any]) -> Config:
        """From a transformers config.json; what this decoder would compute otherwise is
        refused (ValueError, its reason)."""
        if config.get("model_type") != "llama":
            raise ValueError(f"a {config.get('model_type')} model is not a Llama decoder")
        for key, means in (
            ("rope_scaling", "scaled rotary positions"),
            ("attention_bias", "biases on the attention's projections"),
            ("mlp_bias", "biases on the MLP's projections"),
        ):
            if config.get(key):
                raise ValueError(f"Flax's Llama decoder has no {means} ({key})")
        if config.get("hidden_act", "silu") != "silu":
            raise ValueError(f"Flax's Llama decoder has SiLU only, not {config['hidden_act']}")
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        return cls(
            hidden=hidden,
            intermediate=int(config["intermediate_size"]),
            layers=int(config["num_hidden_layers"]),
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            vocab=int(config["vocab_size"]),
            eps=float(config.get("rms_norm_eps", 1e-6)),
            theta=float(config.get("rope_theta", 10000.0)),
            tied=bool(config.get("tie_word_embeddings", False)),
        )


class RMSNorm(nnx.Module):
    def __init__(self, width: int, eps: float) -> None:
        self.weight = nnx.Param(jnp.ones((width,), jnp.float32))
        self.eps = eps

    def __call__(self, x: Any) -> Any:
        # As transformers': the statistics in float32, the weight applied in x's dtype.
        found = x.astype(jnp.float32)
        found = found * jax.lax.rsqrt(jnp.mean(found**2, axis=-1, keepdims=True) + self.eps)
        return self.weight[...].astype(x.dtype) * found.astype(x.dtype)


def _rotate(x: Any, positions: Any, theta: float) -> Any:
    """transformers' rotary embedding: the head's two halves rotated, frequency i of the
    first half paired with i of the second."""
    head = x.shape[-1]
    inverse = 1.0 / (theta ** (jnp.arange(0, head, 2, dtype=jnp.float32) / head))
    angles = positions.astype(jnp.float32)[:, None] * inverse[None, :]
    angles = jnp.concatenate([angles, angles], axis=-1)  # (length, head)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    first, second = jnp.split(x, 2, axis=-1)
    return x * cos + jnp.concatenate([-second, first], axis=-1) * sin


def _linear(n_in: int, n_out: int, rngs: nnx.Rngs) -> nnx.Linear:
    return nnx.Linear(n_in, n_out, use_bias=False, rngs=rngs)


class Attention(nnx.Module):
    def __init__(self, c: Config, rngs: nnx.Rngs) -> None:
        self.c = c
        self.q_proj = _linear(c.hidden, c.heads * c.head_dim, rngs)
        self.k_proj = _linear(c.hidden, c.kv_heads * c.head_dim, rngs)
        self.v_proj = _linear(c.hidden, c.kv_heads * c.head_dim, rngs)
        self.o_proj = _linear(c.heads * c.head_dim, c.hidden, rngs)

    def __call__(
        self, x: Any, start: Any = 0, cache: LayerCache | None = None
    ) -> tuple[Any, LayerCache | None]:
        c = self.c
        batch, length, _ = x.shape
        queries = start + jnp.arange(length)

        def heads(t: Any, n: int) -> Any:
            return t.reshape(batch, length, n, c.head_dim).transpose(0, 2, 1, 3)

        q = _rotate(heads(self.q_proj(x), c.heads), queries, c.theta)
        k = _rotate(heads(self.k_proj(x), c.kv_heads), queries, c.theta)
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
        scores = (q @ keys.transpose(0, 1, 3, 2)).astype(jnp.float32) / math.sqrt(c.head_dim)
        visible = known[None, :] <= queries[:, None]
        scores = jnp.where(visible, scores, np.finfo(np.float32).min)
        weights = jax.nn.softmax(scores, axis=-1).astype(values.dtype)
        out = (weights @ values).transpose(0, 2, 1, 3).reshape(batch, length, -1)
        return self.o_proj(out), cache


class Layer(nnx.Module):
    def __init__(self, c: Config, rngs: nnx.Rngs) -> None:
        self.input_layernorm = RMSNorm(c.hidden, c.eps)
        self.self_attn = Attention(c, rngs)
        self.post_attention_layernorm = RMSNorm(c.hidden, c.eps)
        self.gate_proj = _linear(c.hidden, c.intermediate, rngs)
        self.up_proj = _linear(c.hidden, c.intermediate, rngs)
        self.down_proj = _linear(c.intermediate, c.hidden, rngs)

    def __call__(
        self, x: Any, start: Any = 0, cache: LayerCache | None = None
    ) -> tuple[Any, LayerCache | None]:
        attended, cache = self.self_attn(self.input_layernorm(x), start, cache)
        x = x + attended
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(jax.nn.silu(self.gate_proj(h)) * self.up_proj(h)), cache


class Llama(Decoder):
    """Causal language model, called as flax_gpt.GPT2 is (Decoder)."""

    def __init__(self, c: Config, rngs: nnx.Rngs) -> None:
        self.c = c
        self.embed_tokens = nnx.Embed(c.vocab, c.hidden, rngs=rngs)
        self.layers = nnx.List([Layer(c, rngs) for _ in range(c.layers)])
        self.norm = RMSNorm(c.hidden, c.eps)
        self.lm_head = None if c.tied else _linear(c.hidden, c.vocab, rngs)

    def embed(self, ids: Any, positions: Any) -> Any:
        return self.embed_tokens(ids)  # positions enter as rotations, in the attention

    def blocks(self) -> Any:
        return self.layers

    def head(self, x: Any) -> Any:
        x = self.norm(x)
        return self.embed_tokens.attend(x) if self.lm_head is None else self.lm_head(x)

    def cache_shape(self, batch: int, length: int) -> tuple[int, ...]:
        return (batch, self.c.kv_heads, length, self.c.head_dim)


def _place(model: Llama, name: str) -> tuple[Any, bool] | None:
    """The parameter a transformers weight name is, and whether it is transposed (a
    Linear's weight is (out, in) there, (in, out) here)."""
    parts = name.removeprefix("model.").split(".")
    if parts == ["embed_tokens", "weight"]:
        return model.embed_tokens.embedding, False
    if parts == ["norm", "weight"]:
        return model.norm.weight, False
    if parts == ["lm_head", "weight"]:
        return (model.lm_head.kernel, True) if model.lm_head is not None else None
    if len(parts) == 4 and parts[0] == "layers" and parts[3] == "weight":
        layer = model.layers[int(parts[1])]
        if parts[2] in ("input_layernorm", "post_attention_layernorm"):
            return getattr(layer, parts[2]).weight, False
        return getattr(layer, parts[2]).kernel, True
    if len(parts) == 5 and parts[0] == "layers" and parts[2] in ("self_attn", "mlp"):
        layer = model.layers[int(parts[1])]
        owner = layer.self_attn if parts[2] == "self_attn" else layer
        return getattr(owner, parts[3]).kernel, True
    return None


def load(folder: Path) -> Llama:
    """The decoder of a transformers model folder (its config.json and safetensors):
    every weight placed, none missing, none left over (ValueError otherwise)."""
    import json

    from safetensors.flax import load_file  # bfloat16 too (a published size's weights)

    config = json.loads((folder / "config.json").read_text())
    model = Llama(Config.of(config), nnx.Rngs(0))
    placed = 0
    for path in sorted(folder.glob("*.safetensors")):
        for name, value in load_file(str(path)).items():
            found = _place(model, name)
            if found is None:
                if name == "lm_head.weight":  # tied: the embedding is the output layer
                    continue
                raise ValueError(f"weight {name} has no place in Flax's Llama decoder")
            param, transposed = found
            array = np.asarray(value.astype(jnp.float32))
            array = array.T if transposed else array
            shape = tuple(param.get_value().shape)
            if array.shape != shape:
                raise ValueError(f"weight {name}: shape {array.shape}, the model's {shape}")
            param.set_value(jnp.asarray(array))
            placed += 1
    expected = len(jax.tree.leaves(nnx.state(model, nnx.Param)))
    if placed != expected:
        raise ValueError(f"{placed} of the decoder's {expected} weights were found in {folder}")
    return model
