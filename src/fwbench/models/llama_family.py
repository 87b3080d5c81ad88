"""Which transformers decoders fwbench's own Flax decoder computes (models/flax_llama.py),
read from a config.json before any framework is imported: the source refuses the others
before any work (sources/hf.py), the Flax worker builds from the same reading.

The Llama family: transformers' Llama, Mistral, Qwen 2 and 3, Gemma 1 to 3, Phi-3 and
SmolLM3, each with what its modeling file adds to Llama's decoder (FAMILIES), and the
rotary positions transformers computes for them unscaled, `linear`, or `llama3` (Llama
3.1 and 3.2's checkpoints). What the decoder would compute otherwise is refused with the
reason (ValueError), not run differently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# What each transformers model_type computes besides Llama's decoder: `qkv_bias`, biases
# on the query, key and value projections always (Qwen 2), where the others bias them
# (with the output projection) as the config's `attention_bias` says; `qk_norm`, an
# RMSNorm over each query and key head (Qwen 3, Gemma 3); `gemma`, norms that scale by
# 1 + weight and embeddings scaled by the width's square root; `sandwich`, norms after
# the attention and around the MLP too, queries scaled by `query_pre_attn_scalar`, and
# the attention's and the output's logits soft-capped where the config says (Gemma 2
# and 3). Their sliding windows: sliding_windows.
FAMILIES: dict[str, dict[str, bool]] = {
    "llama": {},
    "mistral": {},
    "qwen2": {"qkv_bias": True},
    "qwen3": {"qk_norm": True},
    "gemma": {"gemma": True},
    "gemma2": {"gemma": True, "sandwich": True},
    "gemma3_text": {"gemma": True, "sandwich": True, "qk_norm": True},
    "phi3": {},
    "smollm3": {},
}
# What transformers reads where a config.json leaves a key out, where that differs from
# what the decoder would otherwise take (Llama's): transformers 5's configuration classes'
# defaults (tests/unit/test_sources.py checks them against the installed transformers). A
# config transformers writes holds every key; a hand-written or older one may not.
DEFAULTS: dict[str, dict[str, Any]] = {
    "mistral": {"sliding_window": 4096},
    "gemma": {"hidden_act": "gelu_pytorch_tanh"},
    "gemma2": {
        "hidden_activation": "gelu_pytorch_tanh",
        "attn_logit_softcapping": 50.0,
        "final_logit_softcapping": 30.0,
        "query_pre_attn_scalar": 256,
    },
    "gemma3_text": {
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": 256,
        "rope_theta": 1000000.0,
    },
    "phi3": {"rms_norm_eps": 1e-5},
    "smollm3": {"rope_theta": 2000000.0, "tie_word_embeddings": True},
}


def as_read(config: dict[str, Any]) -> dict[str, Any]:
    """A config.json as transformers reads it: the keys it leaves out at their family's
    defaults (DEFAULTS)."""
    return {**DEFAULTS.get(str(config.get("model_type")), {}), **config}


# The decoders whose config's sliding window is on every layer (the others' layers are
# placed by `layer_types`).
WINDOW_EVERYWHERE = ("mistral", "mixtral", "phi3")
ACTIVATIONS = ("silu", "gelu_pytorch_tanh")
# transformers' rotary positions the decoder computes, by rope_type, and the settings
# each reads.
ROPE_TYPES = {
    "default": (),
    "linear": ("factor",),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}


@dataclass(frozen=True)
class Rope:
    theta: float
    kind: str = "default"
    settings: tuple[tuple[str, float], ...] = ()

    def get(self, name: str) -> float:
        return dict(self.settings)[name]


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
    rope: Rope
    tied: bool
    activation: str = "silu"
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    qk_norm: bool = False
    gemma: bool = False
    sandwich: bool = False
    # What the scores are divided by the square root of (Gemma 2/3 set their own); None:
    # the head's width, as every other family.
    query_scalar: float | None = None
    attention_cap: float | None = None
    output_cap: float | None = None
    local_rope: Rope | None = None  # Gemma 3's sliding layers rotate by their own base
    # Per layer: the sliding window's width (None: every earlier position), and whether
    # the layer rotates its queries and keys (SmolLM3 leaves some unrotated).
    windows: tuple[int | None, ...] = ()
    rotary: tuple[bool, ...] = ()

    @property
    def query_scale(self) -> float:
        """What the attention scores are multiplied by."""
        return 1.0 / math.sqrt(self.query_scalar or self.head_dim)

    @classmethod
    def of(cls, config: dict[str, Any]) -> Config:
        """From a transformers config.json; what the decoder would compute otherwise is
        refused (ValueError, its reason)."""
        config = as_read(config)
        kind = config.get("model_type")
        if kind not in FAMILIES:
            raise ValueError(
                f"a {kind} model is not of the Llama family Flax's decoder reads "
                f"({', '.join(FAMILIES)})"
            )
        family = FAMILIES[kind]
        activation = config.get("hidden_activation") or config.get("hidden_act", "silu")
        if family.get("gemma") and activation == "gelu":
            activation = "gelu_pytorch_tanh"  # as transformers reads Gemma's legacy name
        if activation not in ACTIVATIONS:
            raise ValueError(f"Flax's {kind} decoder has no activation {activation}")
        if config.get("use_bidirectional_attention"):
            raise ValueError(f"Flax's {kind} decoder is causal only")
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        layers = int(config["num_hidden_layers"])
        biased = bool(config.get("attention_bias", False))
        head_dim = int(config.get("head_dim") or hidden // heads)
        sandwich = family.get("sandwich", False)
        scalar = config.get("query_pre_attn_scalar") if sandwich else None
        rope, local = gemma3_ropes(config) if kind == "gemma3_text" else (rope_of(config), None)
        return cls(
            hidden=hidden,
            intermediate=int(config["intermediate_size"]),
            layers=layers,
            heads=heads,
            kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=head_dim,
            vocab=int(config["vocab_size"]),
            eps=float(config.get("rms_norm_eps", 1e-6)),
            rope=rope,
            tied=bool(config.get("tie_word_embeddings", family.get("gemma", False))),
            activation=activation,
            qkv_bias=biased or family.get("qkv_bias", False),
            out_bias=biased,
            mlp_bias=bool(config.get("mlp_bias", False)),
            qk_norm=family.get("qk_norm", False),
            gemma=family.get("gemma", False),
            sandwich=sandwich,
            query_scalar=float(scalar) if scalar else None,
            attention_cap=_cap(config.get("attn_logit_softcapping")) if sandwich else None,
            output_cap=_cap(config.get("final_logit_softcapping")) if sandwich else None,
            local_rope=local,
            windows=sliding_windows(config),
            rotary=_rotary(config, layers),
        )


def refusal(config: dict[str, Any]) -> str | None:
    """Why Flax's decoder would not compute this configuration as transformers does;
    None where it does."""
    try:
        Config.of(config)
    except KeyError as exc:
        return f"its config has no {exc.args[0]}"
    except (ValueError, TypeError) as exc:
        return str(exc)
    return None


def rope_parameters(config: dict[str, Any]) -> dict[str, Any]:
    """The rotary positions' settings, where transformers 5 writes them
    (`rope_parameters`) or where older checkpoints do (`rope_theta`, `rope_scaling`)."""
    found = dict(config.get("rope_parameters") or {})
    scaling = config.get("rope_scaling") or {}
    if scaling:  # it replaces the rest, as transformers reads it
        kept = {"rope_theta": found["rope_theta"]} if "rope_theta" in found else {}
        found = {**kept, **scaling, "rope_type": scaling.get("rope_type", scaling.get("type"))}
        found["rope_type"] = found["rope_type"] or "default"
    if "rope_theta" not in found and "rope_theta" in config:
        found["rope_theta"] = config["rope_theta"]
    return found


def rope_of(config: dict[str, Any]) -> Rope:
    rope = rope_parameters(config)
    if "rope_type" not in rope and any(isinstance(v, dict) for v in rope.values()):
        raise ValueError("Flax's decoder has one rotary base for every layer, not one per kind")
    kind = str(rope.get("rope_type", "default"))
    if kind not in ROPE_TYPES:
        raise ValueError(
            f"Flax's decoder has no {kind} rotary positions (it computes {', '.join(ROPE_TYPES)})"
        )
    part = float(rope.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0)))
    if part != 1.0:
        raise ValueError(f"Flax's decoder rotates whole heads, not {part} of each")
    missing = [name for name in ROPE_TYPES[kind] if name not in rope]
    if missing:
        raise ValueError(f"{kind} rotary positions without {', '.join(missing)}")
    settings = tuple((name, float(rope[name])) for name in ROPE_TYPES[kind])
    return Rope(float(rope.get("rope_theta", 10000.0)), kind, settings)


def _cap(value: Any) -> float | None:
    return float(value) if value else None


def gemma3_ropes(config: dict[str, Any]) -> tuple[Rope, Rope]:
    """Gemma 3's two rotary positions: the full layers' (a base of 1,000,000, scaled
    linearly in the larger sizes) and the sliding layers' (10,000), as transformers 5
    writes them (one entry per kind of layer) or older checkpoints do (`rope_theta`,
    `rope_scaling` and `rope_local_base_freq`)."""
    config = as_read(config)
    given = config.get("rope_parameters") or {}
    if "full_attention" in given or "sliding_attention" in given:
        kinds = {kind: given.get(kind) or {} for kind in ("full_attention", "sliding_attention")}
        full, local = ({"rope_parameters": kinds[k]} for k in kinds)
        return rope_of(full), rope_of(local)
    local_base = float(config.get("rope_local_base_freq", 10000.0))
    return rope_of(config), Rope(local_base)


# Families whose layers alternate sliding and full attention by a period, as
# transformers derives them from a config that names no `layer_types` (the published
# checkpoints written before transformers 5): every period-th layer full, the others
# sliding, with the family's window (the second number) unless the config gives one.
# Gemma 3 reads the period from `sliding_window_pattern`.
ALTERNATING: dict[str, tuple[int, int]] = {"gemma2": (2, 4096), "gemma3_text": (6, 4096)}


def layer_kinds(config: dict[str, Any]) -> list[str] | None:
    """Each layer's attention (`sliding_attention`, `full_attention`) as the config names
    it, or as transformers derives it for a family that alternates (ALTERNATING); None
    where neither says."""
    config = as_read(config)
    kinds = config.get("layer_types")
    kind = config.get("model_type")
    if kinds is None and kind in ALTERNATING:
        period = int(config.get("sliding_window_pattern", ALTERNATING[kind][0]))
        layers = int(config["num_hidden_layers"])
        return [
            "sliding_attention" if (i + 1) % period else "full_attention" for i in range(layers)
        ]
    return None if kinds is None else list(kinds)


def sliding_windows(config: dict[str, Any]) -> tuple[int | None, ...]:
    """transformers' sliding window of each layer (None: every earlier position)."""
    config = as_read(config)
    layers = int(config["num_hidden_layers"])
    kind = config.get("model_type")
    everywhere = kind in WINDOW_EVERYWHERE
    window = config.get("sliding_window")
    if kind in ALTERNATING and "sliding_window" not in config:
        window = ALTERNATING[kind][1]
    kinds = layer_kinds(config)
    if kinds is None:
        if config.get("use_sliding_window") and window:
            # transformers derives the sliding layers from the family's own rule.
            raise ValueError("a sliding window without `layer_types` naming its layers")
        return tuple(window if everywhere and window else None for _ in range(layers))
    if len(kinds) != layers:
        raise ValueError(f"{len(kinds)} layer_types for {layers} layers")
    if "sliding_attention" not in kinds:
        return (None,) * layers
    if window is None:
        raise ValueError("sliding layers without a sliding_window")
    return tuple(int(window) if k == "sliding_attention" else None for k in kinds)


def _rotary(config: dict[str, Any], layers: int) -> tuple[bool, ...]:
    unrotated = config.get("no_rope_layers")  # SmolLM3: 1 where a layer rotates
    if unrotated is None:
        return (True,) * layers
    if len(unrotated) != layers:
        raise ValueError(f"{len(unrotated)} no_rope_layers for {layers} layers")
    return tuple(bool(flag) for flag in unrotated)
