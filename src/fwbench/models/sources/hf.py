"""A transformers architecture: `hf:ARCH` (a configuration fwbench holds for it: its small
one, or `hf:ARCH@SIZE`, a tiny one for tests or a published model's dimensions) or
`hf:DIR` (a local model folder: its `config.json`, and its weights where it has them).
Nothing is downloaded, ever.

One set of weights serves every framework. A folder's own safetensors are read as they
are; otherwise random weights are made once per configuration (transformers' own
initialisation under a fixed seed, in a PyTorch process) and kept as safetensors in the
user's cache, keyed by the configuration's hash (never in the user's folder).
transformers reads them for PyTorch, and keras-hub's converters for Keras 3's three
backends (TensorFlow, JAX, PyTorch), where keras-hub reads the architecture
(`ARCHS[...].keras_hub`; `fwbench models --model hf:X` says which frameworks run it).
Decoder-only (causal) models also run the task `generate`.

Its input is `input_ids` (B x sequence, token ids below the vocabulary); the sequence
length is the user's to give (`--input-shape input_ids=Bx128`), up to its context."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fwbench import cache
from fwbench.cache import cache_dir
from fwbench.catalog.inputs import TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models import llama_family
from fwbench.models.sources.common import (
    DIGEST_CHARS,
    digest,
    digest_text,
    existing,
    file_model,
    user_model,
    within,
)

PREFIX = "hf:"
SEED = 0  # transformers' random initialisation, the same in every process
KERAS = ("tensorflow",)  # the builder Keras 3's backends build from (their `models_from`)
WEIGHTS = "hf-weights"  # the cache's folder of random weights, one per configuration


@dataclass(frozen=True)
class Arch:
    """What fwbench holds for one transformers architecture: its configurations (the
    small default, a tiny one for tests, published sizes with random weights) and how
    keras-hub reads its checkpoints, or why it cannot."""

    causal: bool
    small: dict[str, Any]
    tiny: dict[str, Any] = field(default_factory=dict)
    # Published models' dimensions (random weights, written in bfloat16: a 7B model's
    # fp32 weights would not fit most hosts twice).
    sizes: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The keras-hub CausalLM that reads its checkpoints ("" when none does), and why not.
    keras_hub: str = ""
    keras_why: str = ""
    model_type: str = ""  # transformers' name, where it differs from the arch's

    def config(self, size: str) -> dict[str, Any]:
        if size == "small":
            return self.small
        if size == "tiny":
            return {**self.small, **self.tiny}
        return self.sizes[size]


CONTEXT = 512
VOCAB = 32000
# The small configurations: 4 layers of width 256 (a few million parameters besides the
# embeddings), context 512, vocabulary 32,000; each architecture's own names for them.
_COMMON = {
    "hidden_size": 256,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "max_position_embeddings": CONTEXT,
    "vocab_size": VOCAB,
}
# The tiny ones, for tests on 2 cores: 2 layers of width 64, context 128, vocabulary 512.
_TINY = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 128,
    "vocab_size": 512,
}
# Token ids every architecture's vocabulary holds: no special token is generated, so a
# generation's tokens are the model's argmax alone (keras-hub stops at none either).
_NO_SPECIALS = {"bos_token_id": None, "eos_token_id": None, "pad_token_id": 0}
# keras-hub's decoders: decoder-only, grouped-query attention, rotary positions.
_DECODER = {**_COMMON, "num_key_value_heads": 2, "tie_word_embeddings": False, **_NO_SPECIALS}
_LLAMA_3 = {"rope_theta": 500000.0, "head_dim": 64, **_NO_SPECIALS}
_MOE = {"num_experts_per_tok": 2, "moe_intermediate_size": 256}
_MOE_TINY = {"moe_intermediate_size": 64}
# Gemma 2 and 3 scale queries by query_pre_attn_scalar; keras-hub by the head's width
# unless the two agree (its converter checks): they do here.
_GEMMA = {"head_dim": 64, "query_pre_attn_scalar": 64}
_GEMMA_TINY = {"head_dim": 16, "query_pre_attn_scalar": 16, "sliding_window": 64}
_NOT_CONVERTED = (
    "keras-hub reads no checkpoint of this architecture; PyTorch and the runtimes it "
    "exports to run it"
)

ARCHS: dict[str, Arch] = {
    "gpt2": Arch(
        True,
        {"n_embd": 256, "n_layer": 4, "n_head": 4, "n_positions": CONTEXT, "vocab_size": VOCAB},
        {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 128, "vocab_size": 512,
         **_NO_SPECIALS},
        keras_hub="GPT2CausalLM",
    ),
    "llama": Arch(
        True,
        {**_COMMON, "num_key_value_heads": 4},
        {**_TINY, "tie_word_embeddings": False, **_NO_SPECIALS},
        sizes={
            # Llama 3.2 1B and Llama 3.1 8B, their context cut to 8,192 positions.
            "1b": {"hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                   "max_position_embeddings": 8192, "tie_word_embeddings": True, **_LLAMA_3},
            "8b": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
                   "max_position_embeddings": 8192, "tie_word_embeddings": False,
                   **_LLAMA_3, "head_dim": 128},
        },
        keras_hub="Llama3CausalLM",
    ),
    "mistral": Arch(
        True,
        {**_COMMON, "num_key_value_heads": 4, "sliding_window": None},
        {**_TINY, "tie_word_embeddings": False, **_NO_SPECIALS},
        sizes={
            # Mistral 7B v0.1 (its sliding window of 4,096 positions kept).
            "7b": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                   "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
                   "max_position_embeddings": 8192, "sliding_window": 4096,
                   "tie_word_embeddings": False, **_NO_SPECIALS},
        },
        keras_hub="MistralCausalLM",
    ),
    "mixtral": Arch(
        True,
        {**_DECODER, "num_local_experts": 4, "sliding_window": None, **_MOE},
        {**_TINY, "num_local_experts": 4, "num_experts_per_tok": 2, **_NO_SPECIALS},
        keras_hub="MixtralCausalLM",
    ),
    "gemma": Arch(
        True,
        {**_COMMON, "num_key_value_heads": 1, "head_dim": 64, **_NO_SPECIALS},
        {**_TINY, "head_dim": 16},
        sizes={
            # Gemma 2B.
            "2b": {"hidden_size": 2048, "intermediate_size": 16384, "num_hidden_layers": 18,
                   "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
                   "vocab_size": 256000, "max_position_embeddings": 8192, **_NO_SPECIALS},
        },
        keras_hub="GemmaCausalLM",
    ),
    "gemma2": Arch(
        True,
        {**_COMMON, "num_key_value_heads": 2, "sliding_window": 256, **_GEMMA, **_NO_SPECIALS},
        {**_TINY, **_GEMMA_TINY},
        keras_hub="GemmaCausalLM",
    ),
    "gemma3": Arch(
        True,
        {**_COMMON, "num_key_value_heads": 2, "sliding_window": 256, **_GEMMA, **_NO_SPECIALS},
        {**_TINY, **_GEMMA_TINY},
        keras_hub="Gemma3CausalLM",
        model_type="gemma3_text",
    ),
    "qwen2": Arch(
        True,
        {**_COMMON, "num_key_value_heads": 4},
        {**_TINY, "tie_word_embeddings": False, **_NO_SPECIALS},
        keras_hub="QwenCausalLM",
    ),
    "qwen3": Arch(
        True,
        {**_DECODER, "head_dim": 64},
        {**_TINY, "head_dim": 16},
        keras_hub="Qwen3CausalLM",
    ),
    "qwen2_moe": Arch(
        True,
        {**_DECODER, "num_experts": 4, "shared_expert_intermediate_size": 512, **_MOE},
        {**_TINY, "num_experts": 4, "num_experts_per_tok": 2,
         "shared_expert_intermediate_size": 128, **_MOE_TINY, **_NO_SPECIALS},
        keras_hub="QwenMoeCausalLM",
    ),
    "qwen3_moe": Arch(
        True,
        {**_DECODER, "head_dim": 64, "num_experts": 4, **_MOE},
        {**_TINY, "head_dim": 16, "num_experts": 4, "num_experts_per_tok": 2, **_MOE_TINY,
         **_NO_SPECIALS},
        keras_hub="Qwen3MoeCausalLM",
    ),
    "phi3": Arch(
        True,
        {**_DECODER, "rope_scaling": None},
        {**_TINY, **_NO_SPECIALS},
        # keras-hub has Phi-3's model but no converter of its checkpoints: fwbench's own
        # (frameworks/keras_hub.py) reads them into it.
        keras_hub="Phi3CausalLM",
    ),
    "smollm3": Arch(
        True,
        # keras-hub's SmolLM3 ties its embeddings (its converter reads no output head).
        {**_DECODER, "tie_word_embeddings": True},
        {**_TINY, "tie_word_embeddings": True, **_NO_SPECIALS},
        keras_hub="SmolLM3CausalLM",
    ),
    "gpt_neox": Arch(True, _COMMON, keras_why=_NOT_CONVERTED),
    "opt": Arch(
        True,
        {"hidden_size": 256, "ffn_dim": 1024, "num_hidden_layers": 4, "num_attention_heads": 4,
         "max_position_embeddings": CONTEXT, "vocab_size": VOCAB, "word_embed_proj_dim": 256},
        keras_why=_NOT_CONVERTED,
    ),
    "bert": Arch(False, _COMMON, keras_why="an encoder: fwbench reads decoders from keras-hub"),
    "roberta": Arch(
        False,
        {**_COMMON, "max_position_embeddings": CONTEXT + 2},
        keras_why="an encoder: fwbench reads decoders from keras-hub",
    ),
}  # fmt: skip
# The decoders fwbench writes in Flax NNX, by transformers model_type: the Llama family
# (models/llama_family.py says what each adds to Llama's decoder). Not the mixtures of
# experts (docs/decisions.md says why).
FLAX = tuple(llama_family.FAMILIES)
# keras-hub's CausalLM of each transformers model_type (an hf:DIR's config names its own).
KERAS_HUB = {
    arch.model_type or name: arch.keras_hub for name, arch in ARCHS.items() if arch.keras_hub
}


def claims(text: str) -> bool:
    return text.startswith(PREFIX)


def _causal_dir(config: dict[str, Any]) -> bool:
    names = config.get("architectures") or []
    return any(n.endswith(("ForCausalLM", "LMHeadModel")) for n in names) and not config.get(
        "is_encoder_decoder", False
    )


def _read_config(folder: Path, text: str) -> dict[str, Any]:
    path = folder / "config.json"
    if not path.is_file():
        raise SpecError(f"model: {text}: {folder} has no config.json (a transformers model folder)")
    try:
        config = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SpecError(f"model: {text}: {path} is not a transformers config ({exc})") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise SpecError(f"model: {text}: {path} has no model_type; not a transformers config")
    if "registered_name" in config:
        # keras-hub would read such a folder as a Keras preset (its objects deserialised
        # from config.json and task.json, its weights from model.weights.h5): other
        # weights than the safetensors every other framework reads and fwbench names.
        raise SpecError(
            f"model: {text}: {path} names a Keras object (registered_name): a keras-hub "
            "preset, not a transformers checkpoint; give a folder of transformers' "
            "config.json and safetensors"
        )
    return config


def _named(given: str) -> tuple[str, str] | None:
    """`ARCH` or `ARCH@SIZE` as (arch, size), or None when it names no configuration."""
    arch, _, size = given.partition("@")
    found = ARCHS.get(arch)
    if found is None:
        return None
    size = size or "small"
    if size == "small" or (size == "tiny" and found.tiny) or size in found.sizes:
        return arch, size
    return None


def _sizes_text() -> str:
    named = []
    for name, arch in ARCHS.items():
        extra = (["tiny"] if arch.tiny else []) + list(arch.sizes)
        named.append(f"hf:{name}" + (f"[@{'|'.join(extra)}]" if extra else ""))
    return ", ".join(named)


SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"


def weight_files(folder: Path) -> list[Path]:
    """A folder's safetensors weights as transformers finds them: the shards its index
    names, else its one `model.safetensors`; none otherwise. Other files beside them (a
    release's `consolidated.safetensors`, the same weights under other names) are not
    the model's: read too, they doubled its parameters and left Flax weights without a
    place."""
    index = folder / SAFETENSORS_INDEX
    if index.is_file():
        try:
            shards = json.loads(index.read_text())["weight_map"].values()
        except (ValueError, KeyError, AttributeError, TypeError, OSError) as exc:
            raise SpecError(
                f"model: {index}: not the index of a safetensors checkpoint ({exc})"
            ) from None
        return [within(folder / name, folder) for name in sorted(set(map(str, shards)))]
    single = folder / SAFETENSORS
    return [within(single, folder)] if single.is_file() else []


def _folder_digest(folder: Path, config_text: str) -> str:
    """What names an hf:DIR: its config, and, where it has weights, each weight file's
    name and the sha256 of all its bytes (a fine-tune that changes a tensor in the middle
    of a file is another model). A file's hash is kept in the cache under what its
    metadata says of it (cached_file_digest): its gigabytes are read once, not at every
    command."""
    h = hashlib.sha256(config_text.encode())
    for path in weight_files(folder):
        h.update(f"\0{path.name}\0{cached_file_digest(path)}\0".encode())
    return h.hexdigest()[:12]


def cached_file_digest(path: Path) -> str:
    """The file's digest (common.digest: the sha256 of its bytes), cached under its
    resolved path, device, inode, size and modification and change times in
    nanoseconds: a file written again (a new fine-tune, a copy over it) has another
    change time, which no tool sets back."""
    try:
        st = path.stat()
    except OSError as exc:
        raise SpecError(f"model: {path}: cannot be read ({exc.strerror or exc})") from None
    key = f"{path.resolve()}|{st.st_dev}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}"
    kept = cache.read("file-sha256", key)
    if isinstance(kept, str) and len(kept) == DIGEST_CHARS:
        return kept
    found = digest(path)
    cache.write("file-sha256", key, found)
    return found


def resolve(text: str) -> ModelSpec:
    given = text[len(PREFIX) :].strip()
    named = _named(given)
    if named is not None:
        arch, size = named
        found = ARCHS[arch]
        config = found.config(size)
        context = config.get("max_position_embeddings") or config.get("n_positions")
        label = "fwbench's small configuration" if size == "small" else f"its {size} size"
        return user_model(
            f"{PREFIX}{given}",
            family="transformers",
            **_frameworks(given, found.model_type or arch, found.causal),
            description=f"transformers' {arch}, {label}, random weights",
            objective="lm" if found.causal else "mean",
            context=int(context) if found.causal and context else None,
        )
    if "@" in given and _named(given.partition("@")[0]) is not None:
        family = ARCHS[given.partition("@")[0]]
        sizes = ", ".join(["small", *(["tiny"] if family.tiny else []), *family.sizes])
        raise SpecError(f"model: {text!r}: no size {given.partition('@')[2]!r}; valid: {sizes}")
    if "/" not in given and not given.startswith(".") and not Path(given).exists():
        raise SpecError(
            f"model: {text!r}: no built-in configuration for {given!r}; valid choices: "
            f"{_sizes_text()}, or hf:DIR (a folder with a config.json)"
        )
    folder = existing(given, "a transformers model", folder=True)
    config = _read_config(folder, text)
    causal = _causal_dir(config)
    context = config.get("max_position_embeddings") or config.get("n_positions")
    content = _folder_digest(folder, (folder / "config.json").read_text())
    weights = "its weights" if weight_files(folder) else "random weights"
    return file_model(
        f"{PREFIX}{folder}", content, f"{PREFIX}{folder.name}",
        family="transformers",
        **_frameworks(str(folder), config["model_type"], causal, config),
        description=f"transformers {config['model_type']} from {folder}, {weights}",
        objective="lm" if causal else "mean",
        context=int(context) if causal and context else None,
    )  # fmt: skip


def keras_refusal(config: dict[str, Any]) -> str | None:
    """Why keras-hub would read this decoder's checkpoint into another computation than
    transformers' at any length: rotary positions scaled in a way its converter ignores
    (it reads Llama 3's `llama3`; the others it would run unscaled), or a Gemma 3 whose
    layers or rotary bases are not the ones keras-hub's model fixes. None where it reads
    it as it is."""
    kind = config["model_type"]
    if kind == "gemma3_text":
        why = _gemma3_keras_refusal(config)
    else:
        scaled = llama_family.rope_parameters(config).get("rope_type", "default")
        read = scaled == "default" or (kind, scaled) == ("llama", "llama3")
        why = None if read else f"reads no {scaled} rotary positions (it would run them unscaled)"
    if why is None:
        return None
    return (
        f"keras-hub's {kind} converter {why}; PyTorch and the runtimes it exports to run this one"
    )


def _gemma3_keras_refusal(config: dict[str, Any]) -> str | None:
    """keras-hub's Gemma 3 slides five layers in six (_KERAS_SLIDES) and rotates them by
    a base of 10,000, the others by 1,000,000, scaled linearly by the config's factor,
    whatever the config says: the released checkpoints' layout."""
    kinds = llama_family.layer_kinds(config)
    slides = _KERAS_SLIDES["gemma3_text"]
    if kinds and [k == "sliding_attention" for k in kinds] != [
        slides(i) for i in range(len(kinds))
    ]:
        return "places a global layer after every five sliding ones, not as the config's layers"
    try:
        full, local = llama_family.gemma3_ropes(config)
    except ValueError as exc:
        return f"reads other rotary positions ({exc})"
    if (full.theta, local.theta) != (1e6, 1e4) or full.kind not in ("default", "linear"):
        return "rotates by bases of 1,000,000 and 10,000, scaled linearly, not the config's"
    if local.kind != "default":
        return f"rotates the sliding layers unscaled, not {local.kind}"
    return None


# Which layers keras-hub's model of a transformers model_type slides its window over (the
# config's width); a model_type missing here slides none: its converter drops the setting.
_KERAS_SLIDES: dict[str, Callable[[int], bool]] = {
    "mistral": lambda i: True,
    "mixtral": lambda i: True,
    "gemma2": lambda i: i % 2 == 0,
    "gemma3_text": lambda i: i % 6 < 5,
}


def keras_alike(config: dict[str, Any]) -> tuple[int, str] | None:
    """Up to how many positions keras-hub computes what transformers does where their
    sliding windows differ (a window covering the whole sequence changes nothing), and
    why no further; None where they slide alike."""
    kind = config["model_type"]
    try:
        windows = llama_family.sliding_windows(config)
    except (ValueError, KeyError):  # a window on layers transformers places by its own rule
        window = config.get("sliding_window")
        return (int(window), f"keras-hub's {kind} slides no window") if window else None
    slid = {w for w in windows if w}
    context = config.get("max_position_embeddings")
    if not slid or (context and min(slid) >= int(context)):
        return None
    slides = _KERAS_SLIDES.get(kind)
    kept = [slides is not None and slides(i) for i in range(len(windows))]
    if len(slid) == 1 and kept == [w is not None for w in windows]:
        return None
    where = "no window" if slides is None else "its window over other layers"
    return min(slid), (
        f"keras-hub's {kind} slides {where} where transformers slides one of {min(slid)}"
    )


def _frameworks(
    given: str, kind: str, causal: bool, config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The ModelSpec's fields saying where it runs: PyTorch always; Keras' backends where
    keras-hub reads its model_type as transformers computes it (`alike_within` the
    positions where their sliding windows agree); Flax where its decoder computes it.
    A folder's `config` (its config.json) is checked setting by setting; a built-in size
    has none here (its settings are fwbench's own, each family's checked by the tests,
    the rest transformers' defaults, which only transformers knows)."""
    builders: dict[str, Any] = {"torch": lambda **_: build(given)}
    alike: dict[str, tuple[int, str]] = {}
    if causal and kind in KERAS_HUB and not (config and keras_refusal(config)):
        builders |= dict.fromkeys(KERAS, lambda **_: build_keras(given))
        window = keras_alike(config) if config else None
        alike = dict.fromkeys(KERAS, window) if window else {}
    if causal and kind in FLAX and not (config and llama_family.refusal(config)):
        builders["flax"] = lambda **_: build_flax(given)
    return {"builders": builders, "alike_within": alike}


def can_run(spec: ModelSpec, framework_models: str) -> tuple[bool, str] | None:
    """Whether the Keras builders or Flax's (`framework_models`: the builder a framework
    builds from) read this model, and how or why not; None where the source's entry says."""
    if framework_models != "flax" and framework_models not in KERAS:
        return None
    if framework_models in spec.builders:
        if framework_models == "flax":
            return True, "Flax NNX's decoder of the Llama family, from the same safetensors weights"
        said = "keras-hub's CausalLM, from the same safetensors weights as PyTorch's"
        alike = spec.alike_within.get(framework_models)
        return True, said + (f"; up to {alike[0]} positions ({alike[1]})" if alike else "")
    given = spec.reference[len(PREFIX) :] if spec.reference else spec.name[len(PREFIX) :]
    named = _named(given)
    # A folder's own configuration: one of an architecture keras-hub or Flax reads may
    # still be refused, where either would compute it otherwise (scaled rotary positions).
    config = None if named is not None else _read_config(Path(given), given)
    kind = config["model_type"] if config else ""
    if framework_models == "flax":
        why = llama_family.refusal(config) if config and kind in FLAX else None
        if why:
            return False, f"{why}; PyTorch runs this one"
        return False, (
            f"fwbench's Flax decoder reads {', '.join(FLAX)} checkpoints only; PyTorch, "
            "Keras' backends where keras-hub reads it, and the runtimes run this one"
        )
    if named is not None:
        return False, ARCHS[named[0]].keras_why or _NOT_CONVERTED
    why = keras_refusal(config) if config and kind in KERAS_HUB else None
    if why:
        return False, why
    return False, (
        f"keras-hub reads the checkpoints of {', '.join(sorted(KERAS_HUB))} decoders only; "
        "PyTorch and the runtimes it exports to run this one"
    )


# --- in a worker ---------------------------------------------------------------------


def config_of(given: str) -> Any:
    from transformers import AutoConfig

    named = _named(given)
    if named is not None:
        arch, size = named
        found = ARCHS[arch]
        return AutoConfig.for_model(found.model_type or arch, **found.config(size))
    return AutoConfig.from_pretrained(given, local_files_only=True)


def _causal(given: str, config: Any) -> bool:
    named = _named(given)
    return ARCHS[named[0]].causal if named else _causal_dir(config.to_dict())


def weights_folder(given: str) -> Path:
    """The folder of the model's weights: an hf:DIR's own when it has them, else the
    random weights of its configuration in the user's cache (made first where missing)."""
    if _named(given) is None and weight_files(Path(given)):
        return Path(given)
    named = _named(given)
    if named is not None:
        arch, size = named
        config_text = json.dumps(
            {"model_type": ARCHS[arch].model_type or arch, **ARCHS[arch].config(size)},
            sort_keys=True,
        )
        name = f"{arch}-{size}"
    else:
        config_text = (Path(given) / "config.json").read_text()
        name = Path(given).name
    key = digest_text(f"{config_text}\0seed {SEED}\0dtype {_dtype_of(given)}")
    folder = cache_dir() / WEIGHTS / f"{name}-{key}"
    if not weight_files(folder):
        _make_weights(given, folder)
    return folder


def _dtype_of(given: str) -> str:
    """What random weights are written in: a published size's in bfloat16 (an 8B model's
    fp32 weights, twice in memory while written, would not fit most hosts), else fp32."""
    named = _named(given)
    return "bfloat16" if named is not None and named[1] in ARCHS[named[0]].sizes else "float32"


def _make_weights(given: str, folder: Path) -> None:
    """Random weights of `given`'s configuration, written by transformers under SEED into
    `folder` (made aside, then renamed: a reader never sees half). In a process of Keras
    or JAX (PyTorch is never imported beside them), a PyTorch process of its own writes
    them."""
    # Here, not at the top: the command's process resolves hf: texts and writes nothing.
    import shutil
    import subprocess
    import tempfile

    if any(name in sys.modules for name in ("keras", "tensorflow", "jax")):
        done = subprocess.run(
            [sys.executable, "-m", "fwbench.models.sources.hf", given],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0 or not weight_files(folder):
            last = (done.stderr.strip().splitlines() or ["no error shown"])[-1]
            if last.startswith(f"{MemoryError.__name__}: "):  # fits() refused it there
                raise MemoryError(last.partition(": ")[2])
            raise SpecError(f"model: hf:{given}: its random weights could not be written: {last}")
        return
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    config = config_of(given)
    # Before anything is built or written: a model that cannot run here writes nothing.
    fits(given, meta_count(given))
    dtype = getattr(torch, _dtype_of(given))
    torch.manual_seed(SEED)
    cls = AutoModelForCausalLM if _causal(given, config) else AutoModel
    # On the CPU whatever device the caller builds on: a count builds its model on the
    # meta device (Adapter.model_shapes), and weights written from there would be none.
    with torch.device("cpu"):
        model = cls.from_config(config, dtype=dtype)  # type: ignore[no-untyped-call]
    folder.parent.mkdir(parents=True, exist_ok=True)
    made = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        model.save_pretrained(made)
        _keras_hub_config(made)
        os.replace(made, folder)
    except OSError:
        if not weight_files(folder):  # another process renamed its copy first: fine
            raise
    finally:
        shutil.rmtree(made, ignore_errors=True)


def _keras_hub_config(folder: Path) -> None:
    """What keras-hub reads under other names than transformers 5 writes: Qwen3-MoE's
    number of experts (keras-hub's `num_experts`, transformers' `num_local_experts`)."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    if "num_local_experts" in config and "num_experts" not in config:
        path.write_text(json.dumps({**config, "num_experts": config["num_local_experts"]}))


def build(given: str) -> Any:
    """The model, with the weights every framework reads (in a worker: imports
    transformers and torch)."""
    from transformers import AutoModel, AutoModelForCausalLM

    config = config_of(given)
    causal = _causal(given, config)
    cls = AutoModelForCausalLM if causal else AutoModel
    if causal:
        folder = weights_folder(given)
        fits(given, stored_count(folder))
        found: Any = cls.from_pretrained(
            folder, dtype="float32",
            ignore_mismatched_sizes=True, output_loading_info=True,
        )  # fmt: skip
        model, loaded = found
        _check_loaded(given, loaded)
    else:
        # An encoder: PyTorch runs it alone, from its seeded random initialisation.
        import torch

        torch.manual_seed(SEED)
        model = cls.from_config(config)  # type: ignore[no-untyped-call]
    # A forward pass (train, infer) builds no key/value cache it would throw away; the
    # generation asks for one on every call.
    model.config.use_cache = False
    return model


def _check_loaded(given: str, loaded: dict[str, Any]) -> None:
    """Refuse a folder whose weights do not fit its config.json: transformers would
    initialise the tensors it misses or cannot fit at random, and time another model
    than the one the folder holds."""
    mismatched = sorted(loaded.get("mismatched_keys") or (), key=lambda m: str(m[0]))
    missing = sorted(loaded.get("missing_keys") or ())
    unexpected = sorted(loaded.get("unexpected_keys") or ())
    said = []
    if mismatched:
        name, got, wanted = mismatched[0]
        more = f" (and {len(mismatched) - 1} more)" if len(mismatched) > 1 else ""
        said.append(f"{name} is {list(got)} in the weights, {list(wanted)} by config.json{more}")
    if missing:
        said.append(f"{len(missing)} tensors of its model are not in the weights: {missing[0]}, …")
    if unexpected:
        said.append(
            f"{len(unexpected)} tensors of the weights are not in its model: {unexpected[0]}, …"
        )
    if said:
        raise SpecError(
            f"model: hf:{given}: its weights do not match its config.json: " + "; ".join(said)
        )


def build_keras(given: str) -> Any:
    """The same model in Keras 3, read by keras-hub from the same weights (in a worker of
    a Keras backend: its module, which imports keras-hub, by name, as the zoo's builders
    import theirs)."""
    import importlib

    folder = weights_folder(given)
    fits(given, stored_count(folder))
    return importlib.import_module("fwbench.models.keras_hub_lm").load(folder)


def build_flax(given: str) -> Any:
    """The same decoder in Flax NNX, read from the same weights (in a Flax worker: its
    module, which imports Flax, by name)."""
    import importlib

    folder = weights_folder(given)
    fits(given, stored_count(folder))
    module = importlib.import_module("fwbench.models.flax_llama")
    try:
        return module.load(folder)
    except ValueError as exc:
        raise SpecError(f"model: hf:{given}: {exc}") from None


# Bytes a parameter takes in every framework's model, whatever the task: fwbench reads
# the weights in float32 (bf16 computes under autocast or a mixed policy, its variables
# float32). Training adds gradients and the optimizer's state, generation its cache.
LOADED_BYTES = 4


def fits(given: str, params: int) -> None:
    """Refuse, as an out-of-memory error (the case's result is `oom`; a sweep goes on),
    a model whose float32 weights alone exceed the memory this host has available,
    before it is built: the kernel's out-of-memory killer would stop the worker only
    after minutes of swapping, its weights half written."""
    import psutil

    need, available = params * LOADED_BYTES, psutil.virtual_memory().available
    if need > available:
        gib = 1 << 30
        raise MemoryError(
            f"hf:{given}: its {params / 1e9:.2f}B parameters need {need / gib:.1f} GiB in "
            f"float32, beyond the {available / gib:.1f} GiB of memory available here: a "
            "smaller size, or a host with more memory"
        )


def stored_count(folder: Path) -> int:
    """The parameters in `folder`'s safetensors, from their headers (nothing is read)."""
    from safetensors import safe_open

    total = 0
    for path in weight_files(folder):
        with safe_open(str(path), framework="numpy") as f:
            for name in f.keys():  # noqa: SIM118 (a safe_open handle is no mapping)
                shape = f.get_slice(name).get_shape()
                total += int(math.prod(shape))
    return total


def meta_count(given: str) -> int:
    """The trainable parameters of `given`'s model, built on PyTorch's meta device from
    its configuration: no memory, no weights (in a PyTorch process)."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    from fwbench.models.sources.torch_common import trainable

    config = config_of(given)
    cls = AutoModelForCausalLM if _causal(given, config) else AutoModel
    with torch.device("meta"):
        model = cls.from_config(config)  # type: ignore[no-untyped-call]
    return trainable(model)


def describe(spec: ModelSpec) -> dict[str, Any]:
    import transformers

    given = spec.reference[len(PREFIX) :] if spec.reference else spec.name[len(PREFIX) :]
    config = config_of(given)
    vocab = int(config.vocab_size)
    inputs = [TensorSpec("input_ids", ("B", None), "int64", vocab)]
    if _named(given) is None and weight_files(Path(given)):
        # A folder's own weights are read here, so weights that do not fit its config are
        # refused before a case runs (_check_loaded). Otherwise nothing is built: a named
        # size is counted on the meta device, and a model too large for this host (build
        # refuses it first, fits) is the worker's `oom` result, not a refused command.
        from fwbench.models.sources.torch_common import trainable

        try:
            params = trainable(build(given))
        except MemoryError:
            params = meta_count(given)
    else:
        params = meta_count(given)
    return {
        "inputs": format_signature(inputs),
        "params": params,
        "outputs": "logits over the vocabulary" if spec.context else "hidden states",
        "version": f"transformers {transformers.__version__}",
    }


if __name__ == "__main__":
    # `python -m fwbench.models.sources.hf GIVEN`: write GIVEN's random weights (the
    # PyTorch process a Keras worker starts for them). A worker stopped at its time limit
    # takes it down too: the weights are written aside and renamed, so none are half-made.
    from fwbench.lifetime import die_with_parent

    die_with_parent()
    weights_folder(sys.argv[1])
