"""A Keras 3 model: a file (`PATH.keras`, as `model.save` writes it) or a function that
returns one (`keras:module:function`, `keras:path/file.py:function`). One definition
runs on Keras 3's three backends, `tensorflow`, `keras-jax` and `keras-torch` (the
builder keyed "tensorflow", which the other two read through their `models_from`), and
on the inference runtimes through ONNX: loaded on Keras' PyTorch backend, where a Keras
model is a `torch.nn.Module`, and exported by torch.onnx as the zoo's models are (what
Keras' own `model.export(format="onnx")` does on that backend; on TensorFlow's it needs
tf2onnx, which fwbench does not use), and on LiteRT converted by TensorFlow's converter
from its SavedModel export, as the zoo's Keras models are.

Its inputs are the model's (`model.inputs`: names, shapes, dtypes; a `None` leading
dimension is the batch); a subclassed model declares none, and takes `--input-shape`.
Its parameters are its trainable weights, counted alike on every backend.

A file holds its weights. A function's weights would be drawn by each backend's own
random generator, which gives other numbers for one seed on each backend, so that their
outputs could not be checked against each other: every weight its initializer left
random is drawn again from one NumPy generator (Glorot-uniform, seed 0), the same on
every backend; constant ones (biases, normalisation) are kept. A function that loads
trained weights loses them: save that model (`model.save("net.keras")`) and pass the
file instead.

The file is hashed for the model's name; a function, its module's file."""

from __future__ import annotations

import math
import os
import re
import sys
import zipfile
from typing import Any

from fwbench.catalog.inputs import BATCH, DTYPES, TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import (
    builder,
    call,
    callable_model,
    callable_parts,
    digest,
    existing,
    file_model,
)

PREFIX = "keras"
SUFFIX = ".keras"
_NAME = re.compile(r"[^A-Za-z0-9_.:/\-]")


def claims(text: str) -> bool:
    return text.startswith(f"{PREFIX}:") or text.lower().endswith(SUFFIX)


def resolve(text: str) -> ModelSpec:
    # Keras' own frameworks build it: TensorFlow's, and Keras on PyTorch (keras-torch).
    builds = {"tensorflow": build, "torch": build_on_torch}
    if text.startswith(f"{PREFIX}:"):
        return callable_model(text, PREFIX, builds, family="keras")
    path = existing(text, "a Keras model file")
    if not zipfile.is_zipfile(path):
        raise SpecError(
            f"model: {text}: not a Keras model file (a .keras file is the zip archive "
            "model.save writes; this one is not a zip)"
        )
    reference = str(path)
    return file_model(
        reference, digest(path), path.name,
        family="keras",
        builders={fw: builder(b, reference) for fw, b in builds.items()},
        description=f"Keras model file {path}",
    )  # fmt: skip


def _load(path: str) -> Any:
    import keras

    try:
        return keras.saving.load_model(path)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SpecError(
            f"model: {path}: Keras cannot load it ({type(exc).__name__}: {first})"
        ) from None


def build(reference: str) -> Any:
    """The Keras model on the backend Keras was imported with (in a worker)."""
    if not reference.startswith(f"{PREFIX}:"):
        return _load(reference)
    module, function = callable_parts(reference, PREFIX)
    found = call(module, function, reference)
    # Asked before importing Keras: a function that made a model of another framework
    # did not import it, and importing it beside that framework is never needed.
    keras = sys.modules.get("keras")
    if keras is None or not isinstance(found, keras.Model):
        kind = f"{type(found).__module__}.{type(found).__qualname__}"
        raise SpecError(f"model: {function}() returned a {kind}, not a keras.Model")
    # Built is what is asked: a parameter-free network (a functional model of operations
    # only) is built and has no weights.
    if not found.built:
        raise SpecError(
            f"model: {function}() returned a model that is not built (it has no weights "
            "yet): give it a keras.Input, or call model.build(input_shape) before returning it"
        )
    same_weights(found)
    return found


def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """Keras' fan-in and fan-out of a weight of `shape` (a kernel's last two dimensions
    are its inputs and outputs, any before them its receptive field)."""
    if len(shape) < 2:
        return (shape[0], shape[0]) if shape else (1, 1)
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def same_weights(model: Any) -> None:
    """Draw every floating-point weight that is not constant again, from one NumPy
    generator in the model's weight order: the same values on every backend."""
    import keras
    import numpy as np

    rng = np.random.default_rng(0)
    for variable in model.weights:
        if not keras.backend.is_float_dtype(keras.backend.standardize_dtype(variable.dtype)):
            continue  # counters, seeds
        value = keras.ops.convert_to_numpy(keras.ops.cast(variable.value, "float32"))
        if value.size == 0 or bool((value == value.flat[0]).all()):
            continue  # a constant initializer gives the same values on every backend
        fan_in, fan_out = _fans(tuple(int(d) for d in value.shape))
        limit = math.sqrt(6.0 / max(fan_in + fan_out, 1))
        variable.assign(rng.uniform(-limit, limit, value.shape).astype("float32"))


def build_on_torch(reference: str) -> Any:
    """The model on Keras' PyTorch backend, as a torch.nn.Module whose forward takes the
    inputs as positional tensors (how torch.onnx and fwbench's runtimes call a model), in
    inference: what the runtimes export. Keras reads its backend once, when first
    imported: in a runtime's worker nothing has imported it before."""
    if "keras" not in sys.modules:
        os.environ["KERAS_BACKEND"] = "torch"
    import keras
    import torch

    if keras.backend.backend() != "torch":
        raise RuntimeError(
            f"Keras was imported on its {keras.backend.backend()} backend in this process; "
            "the runtimes export a Keras model from its PyTorch backend"
        )

    class Exportable(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner
            # The runtimes' fusion check follows BatchNormalization nodes after a
            # convolution; Keras' BatchNormalization is elementwise operations once exported.
            norms = [n for n in _layers(inner) if isinstance(n, keras.layers.BatchNormalization)]
            self.fusion_unchecked = (
                f"its {len(norms)} Keras BatchNormalization layers export as elementwise "
                "operations, not as the BatchNormalization nodes the check follows"
                if norms
                else None
            )

        def forward(self, *inputs: Any) -> Any:
            return self.inner(list(inputs) if len(inputs) > 1 else inputs[0], training=False)

    return Exportable(build(reference))


def _layers(model: Any) -> list[Any]:
    """Every layer of the model, nested models' included."""
    found, stack = [], list(getattr(model, "layers", ()))
    while stack:
        layer = stack.pop()
        found.append(layer)
        stack.extend(getattr(layer, "layers", ()))
    return found


def _dims(shape: Any) -> tuple[int | str | None, ...]:
    dims: tuple[int | str | None, ...] = tuple(None if d is None else int(d) for d in shape)
    return (BATCH, *dims[1:]) if dims and dims[0] is None else dims


def describe(spec: ModelSpec) -> dict[str, Any]:
    model = build(spec.reference)  # before importing Keras: see build
    import keras

    inputs = []
    for i, tensor in enumerate(getattr(model, "inputs", None) or ()):
        dtype = keras.backend.standardize_dtype(tensor.dtype)
        if dtype not in DTYPES:
            raise SpecError(
                f"model: {spec.reference}: input {tensor.name} is {dtype}, which fwbench "
                f"cannot make data for (valid: {', '.join(DTYPES)})"
            )
        name = _NAME.sub("_", str(tensor.name or "")) or f"input_{i}"
        inputs.append(TensorSpec(name, _dims(tensor.shape), dtype))
    outputs = [
        "x".join("?" if d is None else str(d) for d in _dims(o.shape))
        for o in getattr(model, "outputs", None) or ()
    ]
    params = sum(math.prod(v.shape) for v in model.trainable_weights)
    return {"inputs": format_signature(inputs), "params": params, "outputs": ", ".join(outputs)}
