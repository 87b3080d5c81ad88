"""A transformers architecture with random weights: `hf:DIR` (a local model folder: its
`config.json`, no weights read) or `hf:ARCH` (a small configuration fwbench holds for
each architecture in SMALL). Nothing is downloaded; the same weights in every worker (a
fixed seed). Decoder-only (causal) models also run the task `generate`.

Its input is `input_ids` (B x sequence, token ids below the vocabulary); the sequence
length is the user's to give (`--input-shape input_ids=Bx128`), up to its context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fwbench.catalog.inputs import TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import digest, existing, file_model, user_model

PREFIX = "hf:"
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
SMALL: dict[str, tuple[bool, dict[str, Any]]] = {  # arch -> (causal, its settings)
    "gpt2": (True, {"n_embd": 256, "n_layer": 4, "n_head": 4, "n_positions": CONTEXT,
                    "vocab_size": VOCAB}),
    "llama": (True, {**_COMMON, "num_key_value_heads": 4}),
    "mistral": (True, {**_COMMON, "num_key_value_heads": 4, "sliding_window": None}),
    "qwen2": (True, {**_COMMON, "num_key_value_heads": 4}),
    "gpt_neox": (True, _COMMON),
    "opt": (True, {"hidden_size": 256, "ffn_dim": 1024, "num_hidden_layers": 4,
                   "num_attention_heads": 4, "max_position_embeddings": CONTEXT,
                   "vocab_size": VOCAB, "word_embed_proj_dim": 256}),
    "bert": (False, _COMMON),
    "roberta": (False, {**_COMMON, "max_position_embeddings": CONTEXT + 2}),
}  # fmt: skip


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
    return config


def resolve(text: str) -> ModelSpec:
    given = text[len(PREFIX) :].strip()
    if given in SMALL:
        causal, _ = SMALL[given]
        return user_model(
            f"{PREFIX}{given}",
            family="transformers",
            builders={"torch": lambda **_: build(given)},
            description=f"transformers' {given}, fwbench's small configuration, random weights",
            objective="lm" if causal else "mean",
            context=CONTEXT if causal else None,
        )
    if "/" not in given and not given.startswith(".") and not Path(given).exists():
        raise SpecError(
            f"model: {text!r}: no built-in configuration for {given!r}; valid choices: "
            f"{', '.join(f'hf:{a}' for a in SMALL)}, or hf:DIR (a folder with a config.json)"
        )
    folder = existing(given, "a transformers model", folder=True)
    config = _read_config(folder, text)
    causal = _causal_dir(config)
    context = config.get("max_position_embeddings") or config.get("n_positions")
    content = digest(folder / "config.json")
    return file_model(
        f"{PREFIX}{folder}", content, f"{PREFIX}{folder.name}",
        family="transformers",
        builders={"torch": lambda **_: build(str(folder))},
        description=f"transformers {config['model_type']} from {folder}, random weights",
        objective="lm" if causal else "mean",
        context=int(context) if causal and context else None,
    )  # fmt: skip


def config_of(given: str) -> Any:
    from transformers import AutoConfig

    if given in SMALL:
        return AutoConfig.for_model(given, **SMALL[given][1])
    return AutoConfig.from_pretrained(given, local_files_only=True)


def build(given: str) -> Any:
    """The model with random weights (in a worker: imports transformers and torch)."""
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    config = config_of(given)
    causal = SMALL[given][0] if given in SMALL else _causal_dir(config.to_dict())
    torch.manual_seed(0)
    cls = AutoModelForCausalLM if causal else AutoModel
    model = cls.from_config(config)  # type: ignore[no-untyped-call]
    # A forward pass (train, infer) builds no key/value cache it would throw away; the
    # generation asks for one on every call.
    model.config.use_cache = False
    return model


def describe(spec: ModelSpec) -> dict[str, Any]:
    import transformers

    from fwbench.models.sources.torch_common import trainable

    given = spec.reference[len(PREFIX) :] if spec.reference else spec.name[len(PREFIX) :]
    config = config_of(given)
    model = build(given)
    vocab = int(config.vocab_size)
    inputs = [TensorSpec("input_ids", ("B", None), "int64", vocab)]
    return {
        "inputs": format_signature(inputs),
        "params": trainable(model),
        "outputs": "logits over the vocabulary" if spec.context else "hidden states",
        "version": f"transformers {transformers.__version__}",
    }
