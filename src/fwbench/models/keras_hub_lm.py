"""A transformers decoder's checkpoint (config.json and safetensors) read by keras-hub into
Keras 3, on whichever backend the worker runs: the same weights as PyTorch's, so the
frameworks compute the same logits and generate the same tokens.

keras-hub 0.32's converters are used as they are, but for what they get wrong against
transformers 5 (each checked against transformers' logits on tiny random models):
Mistral's weights are rounded to float16 on the way in (fwbench reads them at the
case's precision), Llama's and Gemma's norms, and Qwen3's query and key norms, take
keras-hub's epsilon instead of the checkpoint's `rms_norm_eps`, Qwen3-MoE's number of
experts and Llama 3's scaled rotary positions go by other names, and Phi-3's
checkpoints have no converter at all (fwbench's reads them into keras-hub's
Phi3CausalLM).

The zoo's GPT-2 (`gpt2`, `gpt2_tiny`) is keras-hub's GPT2CausalLM too, built to the zoo's
dimensions (fwbench.models.shapes.GPT2); a generation gives it the weights every
framework loads (fwbench.models.gpt_weights) through keras-hub's own GPT-2 converter.

Imported in a worker of a Keras backend only (it imports keras and keras_hub)."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import keras
import numpy as np

from fwbench.cache import cache_dir
from fwbench.models import shapes


class TokenIds(keras.Model):  # type: ignore[misc]
    """A keras-hub causal LM that takes token ids alone, every position attended (as the
    other frameworks' models take them): its logits at every position. `lm` is the
    CausalLM itself (its generation reads it)."""

    def __init__(self, lm: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lm = lm
        # Its one layer is built (read from a checkpoint): so is it (a stateless call,
        # JAX's training step, refuses an unbuilt model).
        self.built = True

    def call(self, token_ids: Any, training: bool = False) -> Any:
        ids = keras.ops.cast(token_ids, "int32")
        mask = keras.ops.ones_like(ids, dtype="bool")
        return self.lm({"token_ids": ids, "padding_mask": mask}, training=training)


class GPT2(TokenIds):
    """The zoo's GPT-2: keras-hub's GPT2CausalLM at the zoo's dimensions, its weights
    keras-hub's random initialisation until `load_gpt2_weights` replaces them."""


def _keras_hub() -> Any:
    if keras.backend.backend() != "tensorflow" and "tensorflow" not in sys.modules:
        # keras-hub imports TensorFlow wherever it can (tf.data for its preprocessors,
        # which fwbench does not use): 3 s more to start on JAX, and on PyTorch both
        # frameworks in one process, which fwbench never allows. It runs without.
        sys.modules["tensorflow"] = None  # type: ignore[assignment]
    import keras_hub

    return keras_hub


def build(name: str, **dims: Any) -> GPT2:
    """The zoo's GPT-2 `name` (a key of shapes.GPT2) under the global dtype policy: the
    same network as transformers' GPT2LMHeadModel on PyTorch (torch_gpt.py), its
    position table as long as the sequence where that is past GPT-2's context."""
    keras_hub = _keras_hub()
    size = shapes.GPT2[name]
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=dims["vocab_size"],
        num_layers=size["layers"],
        num_heads=size["heads"],
        hidden_dim=size["width"],
        intermediate_dim=4 * size["width"],
        dropout=shapes.DROPOUT,
        max_sequence_length=max(size["positions"], dims["seq_len"]),
        dtype=keras.mixed_precision.global_policy().name,
    )
    return GPT2(keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None))


class _Given:
    """keras-hub's checkpoint loader, over weights held in memory (transformers' names
    without the `transformer.` prefix, as its GPT-2 converter asks for them)."""

    def __init__(self, weights: Mapping[str, np.ndarray]) -> None:
        self.weights = weights
        self.read: set[str] = set()

    def port_weight(self, keras_variable: Any, hf_weight_key: str, hook_fn: Any = None) -> None:
        name = f"transformer.{hf_weight_key}"
        value = self.weights[name]
        if hook_fn is not None:
            value = hook_fn(value, list(keras_variable.shape))
        if tuple(keras_variable.shape) != tuple(value.shape):
            raise ValueError(
                f"{name}: shape {value.shape}, the Keras weight's {keras_variable.shape}"
            )
        keras_variable.assign(value)
        self.read.add(name)


def load_gpt2_weights(model: GPT2, weights: Mapping[str, np.ndarray]) -> None:
    """Take the weights of gpt_weights (transformers' names) as the model's, through
    keras-hub's own GPT-2 converter; every one of them is read (the output layer is the
    token embedding, tied, in both)."""
    from keras_hub.src.utils.transformers import convert_gpt2

    backbone = model.lm.backbone
    given = _Given(weights)
    convert_gpt2.convert_weights(backbone, given, {"n_embd": backbone.hidden_dim})
    left = sorted(set(weights) - given.read)
    if left:
        raise ValueError(f"GPT-2 weights the Keras model has no place for: {', '.join(left)}")


def load(folder: Path) -> TokenIds:
    """The checkpoint in `folder` as a Keras model, under the global dtype policy (the
    case's precision)."""
    keras_hub = _keras_hub()
    config = json.loads((folder / "config.json").read_text())
    kind = config["model_type"]
    policy = keras.mixed_precision.global_policy().name
    if kind == "phi3":
        return TokenIds(_phi3(folder, config, policy))
    with _fp32_mistral() if kind == "mistral" else contextlib.nullcontext():
        lm = keras_hub.models.CausalLM.from_preset(
            str(_readable(folder, config)), preprocessor=None, dtype=policy
        )
    if "rms_norm_eps" in config:
        _norm_epsilon(lm, float(config["rms_norm_eps"]))
    return TokenIds(lm)


@contextlib.contextmanager
def _fp32_mistral() -> Iterator[None]:
    """keras-hub's Mistral converter casts every weight to float16 before assigning it
    (a 2.5e-4 error in the logits of a tiny model, enough to flip a greedy token): read
    them as they are stored instead, for the duration of the load."""
    from keras_hub.src.utils.transformers import convert_mistral

    class _AsStored:
        def __getattr__(self, name: str) -> Any:
            return np.float32 if name == "float16" else getattr(np, name)

    before = convert_mistral.np
    convert_mistral.np = _AsStored()
    try:
        yield
    finally:
        convert_mistral.np = before


def _renamed(config: dict[str, Any]) -> dict[str, Any]:
    """What keras-hub reads under another name than transformers 5 writes it: Qwen3-MoE's
    number of experts, and Llama 3's scaled rotary positions (keras-hub reads them from
    `rope_scaling`, which transformers 5 writes into `rope_parameters`)."""
    found: dict[str, Any] = {}
    if "num_local_experts" in config and "num_experts" not in config:
        found["num_experts"] = config["num_local_experts"]
    rope = config.get("rope_parameters") or {}
    if rope.get("rope_type", "default") != "default" and not config.get("rope_scaling"):
        found["rope_scaling"] = rope
    return found


def _readable(folder: Path, config: dict[str, Any]) -> Path:
    """`folder`, or, where keras-hub reads a setting under another name than the
    checkpoint writes it (_renamed), a folder in the cache that holds the config under
    both names beside links to the weights transformers reads (weight_files): the user's
    folder is never written.

    The shadow is named by what it holds (the config, and each link's name and target)
    and built aside, then renamed into place: a folder whose shards changed, or whose
    files moved, gets a new one rather than links left from before (a stale shard read
    beside the new ones, a dangling link that stopped the next load), and two workers
    loading at once never see half of one."""
    from fwbench.models.sources.hf import SAFETENSORS_INDEX, weight_files

    renamed = _renamed(config)
    if not renamed:
        return folder
    index = folder / SAFETENSORS_INDEX
    targets = {p.name: p.resolve() for p in [*weight_files(folder), index] if p.is_file()}
    text = json.dumps({**config, **renamed}, sort_keys=True)
    key = hashlib.sha256(text.encode())
    for name, target in sorted(targets.items()):
        key.update(f"\0{name}\0{target}".encode())
    name = f"{folder.name}-{key.hexdigest()[:16]}"
    try:
        home = cache_dir() / "hf-readable"
        if (home / name).is_dir():
            return home / name
        home.mkdir(parents=True, exist_ok=True)
        return _built(home / name, targets, text)
    except OSError:
        # The cache may be unusable (cache_dir), or not writable here: the copy is made
        # in a folder of this process's own (a shared, predictable one could hold another
        # user's copy), removed when the worker ends.
        private = Path(tempfile.mkdtemp(prefix="fwbench-hf-readable-"))
        atexit.register(shutil.rmtree, private, ignore_errors=True)
        return _built(private / name, targets, text)


def _built(shadow: Path, targets: Mapping[str, Path], config_text: str) -> Path:
    """`shadow`, made aside in its folder and renamed into place (or another worker's,
    made first)."""
    scratch = Path(tempfile.mkdtemp(prefix=".", dir=shadow.parent))
    try:
        for name, target in targets.items():
            os.symlink(target, scratch / name)
        (scratch / "config.json").write_text(config_text)
        try:
            os.rename(scratch, shadow)
        except OSError:
            if not shadow.is_dir():  # not another worker's, made first
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return shadow


def _norm_epsilon(lm: Any, epsilon: float) -> None:
    """Every norm of the model with the checkpoint's epsilon, as transformers computes
    them: keras-hub's Llama and Gemma converters leave their backbones' default (1e-6,
    where Llama 2 and 3's checkpoints say 1e-5) and its Qwen3 builds the query and key
    norms with its own 1e-5. Read at each call, so set before any is traced."""
    for layer in lm.backbone._flatten_layers(include_self=False, recursive=True):
        if "Norm" in type(layer).__name__ and isinstance(getattr(layer, "epsilon", None), float):
            layer.epsilon = epsilon


def _tensors(folder: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    from fwbench.models.sources.hf import weight_files

    found: dict[str, np.ndarray] = {}
    for path in weight_files(folder):
        found |= load_file(str(path))
    return found


def _phi3(folder: Path, config: dict[str, Any], policy: str) -> Any:
    """Phi-3's checkpoint into keras-hub's Phi3CausalLM (keras-hub has no converter of
    it): transformers fuses the query, key and value projections and the gate and up
    projections, keras-hub keeps them apart."""
    import keras_hub

    if config.get("rope_scaling"):
        raise ValueError("a Phi-3 checkpoint with rope scaling (longrope) is not read yet")
    rope = config.get("rope_parameters") or {}
    backbone = keras_hub.models.Phi3Backbone(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_hidden_layers"],
        hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        num_query_heads=config["num_attention_heads"],
        num_key_value_heads=config["num_key_value_heads"],
        layer_norm_epsilon=config["rms_norm_eps"],
        max_sequence_length=config["max_position_embeddings"],
        pretraining_sequence_length=config.get(
            "original_max_position_embeddings", config["max_position_embeddings"]
        ),
        rope_max_wavelength=rope.get("rope_theta", config.get("rope_theta", 10000.0)),
        dtype=policy,
    )
    w = _tensors(folder)
    hidden, inner = config["hidden_size"], config["intermediate_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    width = hidden // heads
    backbone.token_embedding.embeddings.assign(w["model.embed_tokens.weight"])
    backbone.token_embedding.reverse_embeddings.assign(w["lm_head.weight"].T)
    backbone.layer_norm.scale.assign(w["model.norm.weight"])
    for i, layer in enumerate(backbone.transformer_layers):
        p = f"model.layers.{i}."
        layer.pre_attention_layernorm.scale.assign(w[p + "input_layernorm.weight"])
        layer.post_attention_layernorm.scale.assign(w[p + "post_attention_layernorm.weight"])
        qkv = w[p + "self_attn.qkv_proj.weight"].T  # (hidden, (heads + 2 kv) x width): q, k, v
        attention = layer.attention
        attention.query_dense.kernel.assign(qkv[:, :hidden].reshape(hidden, heads, width))
        keys = qkv[:, hidden : hidden + kv_heads * width]
        attention.key_dense.kernel.assign(keys.reshape(hidden, kv_heads, width))
        values = qkv[:, hidden + kv_heads * width :]
        attention.value_dense.kernel.assign(values.reshape(hidden, kv_heads, width))
        out = w[p + "self_attn.o_proj.weight"].T.reshape(heads, width, hidden)
        attention.output_dense.kernel.assign(out)
        gate_up = w[p + "mlp.gate_up_proj.weight"].T  # gate, then up
        layer.feedforward_gate_dense.kernel.assign(gate_up[:, :inner])
        layer.feedforward_intermediate_dense.kernel.assign(gate_up[:, inner:])
        layer.feedforward_output_dense.kernel.assign(w[p + "mlp.down_proj.weight"].T)
    return keras_hub.models.Phi3CausalLM(backbone=backbone, preprocessor=None)
