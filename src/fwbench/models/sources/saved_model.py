"""A TensorFlow SavedModel (a folder with `saved_model.pb`, as `tf.saved_model.save` or
Keras' `model.export` write it): its serving signature, run by TensorFlow inside a
tf.function (graph and xla modes), read as it is by OpenVINO (`openvino.convert_model`
takes the folder; OpenVINO does not import TensorFlow for it), and converted as it is for
LiteRT by TensorFlow's converter (`TFLiteConverter.from_saved_model`).

Its inputs are the signature's (`structured_input_signature`: names, shapes, dtypes; a
`None` leading dimension is the batch), in the order of their names: a signature's
inputs are a map, with no order of their own. Its outputs, likewise, in their names'
order; the first is the one checked across frameworks. A signature is a traced graph: it
cannot be trained (it has no gradient of its own to apply), and TensorFlow cannot run it
op by op, so eager mode would time the same graph under another name.

Its parameters are its trainable variables, read from the folder's object graph
(`saved_model.pb`) without TensorFlow, so that TensorFlow's worker and OpenVINO's count
them by one definition."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fwbench.catalog.inputs import BATCH, TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import digest, existing, file_model, read_model

PROTO = "saved_model.pb"
# The signature TensorFlow serves by default; a SavedModel with one signature of another
# name is served by that one.
SERVING = "serving_default"
# The builder key of the folder as it is, for a runtime that reads SavedModels itself
# (fwbench.frameworks.onnx_graph.SAVED_MODEL).
FOLDER = "saved_model"

# TensorFlow's DataType numbers (types.proto), as fwbench names them.
_DTYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 6: "int8", 9: "int64",
           10: "bool", 14: "bfloat16", 19: "float16"}  # fmt: skip


def claims(text: str) -> bool:
    # Any folder, or any path no source before it claimed (asked last: a transformers
    # folder is `hf:DIR`, every other source a file's suffix or a prefix; a zoo name has
    # no "/"). A folder that is not a SavedModel, or a path that does not exist, is then
    # told so, not "unknown model".
    if "/" in text or text.startswith(("~", ".")):
        return True
    try:
        return Path(text).expanduser().is_dir()
    except OSError:
        return False


def resolve(text: str) -> ModelSpec:
    if not Path(text).expanduser().exists():
        # Claimed as a path: it may have been meant as a file of another source.
        raise SpecError(f"model: {text}: no such file or folder")
    folder = existing(text, "a TensorFlow SavedModel", folder=True)
    if not (folder / PROTO).is_file():
        raise SpecError(
            f"model: {text}: not a TensorFlow SavedModel (the folder has no {PROTO}); give "
            "the folder that tf.saved_model.save or Keras' model.export wrote"
        )
    content = digest(folder)
    return file_model(
        str(folder), content, folder.name,
        family="saved_model",
        builders={"tensorflow": lambda **_: build(str(folder)), FOLDER: lambda **_: folder},
        description=f"TensorFlow SavedModel {folder}",
    )  # fmt: skip


# --- the folder's object graph, read without TensorFlow ---------------------------------
# saved_model.pb is a SavedModel message (tensorflow/core/protobuf/saved_model.proto,
# saved_object_graph.proto). The fields read, by number: SavedModel.meta_graphs = 2;
# MetaGraphDef.object_graph_def = 7; SavedObjectGraph.nodes = 1, .concrete_functions = 2
# (a map: key = 1, value = 2); SavedObject.children = 1 (ObjectReference: node_id = 1,
# local_name = 2), .function = 6 (SavedFunction.concrete_functions = 1),
# .variable = 7, .bare_concrete_function = 8 (its concrete_function_name = 1);
# SavedConcreteFunction.bound_inputs = 2 (the nodes it captures); SavedVariable.shape =
# 2, .trainable = 3; TensorShapeProto.dim = 2; Dim.size = 1. Protobuf skips the fields
# it is not asked for, so these few are read from the wire format directly.


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def _fields(data: bytes) -> Iterator[tuple[int, Any]]:
    """(field number, value) of one message: an int for a varint, bytes otherwise."""
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, at = _varint(data, at)
        elif wire == 1:
            value, at = data[at : at + 8], at + 8
        elif wire == 2:
            size, at = _varint(data, at)
            value, at = data[at : at + size], at + size
        elif wire == 5:
            value, at = data[at : at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire} (groups are not used by SavedModel)")
        yield number, value


def _sub(data: bytes, number: int) -> list[Any]:
    return [value for n, value in _fields(data) if n == number]


def _ints(values: list[Any]) -> list[int]:
    """A repeated integer field, packed (one length-delimited run) or not."""
    found = []
    for value in values:
        if isinstance(value, int):
            found.append(value)
            continue
        at = 0
        while at < len(value):
            number, at = _varint(value, at)
            found.append(number)
    return found


def _children(node: bytes) -> dict[str, int]:
    refs = (dict(_fields(ref)) for ref in _sub(node, 1))
    return {ref.get(2, b"").decode(): int(ref.get(1, 0)) for ref in refs}


class _Graph:
    """The folder's object graph: its nodes, its concrete functions by name, and the
    signature it serves (`serving_default`, else its first) as a node."""

    def __init__(self, folder: str | Path) -> None:
        try:
            meta = _sub((Path(folder) / PROTO).read_bytes(), 2)[0]  # the one TensorFlow loads
            graph = _sub(meta, 7)[0]
            self.nodes = _sub(graph, 1)
            entries = (dict(_fields(entry)) for entry in _sub(graph, 2))
            self.functions = {entry[1].decode(): entry[2] for entry in entries}
            signatures = _children(self.nodes[_children(self.nodes[0])["signatures"]])
            self.key = SERVING if SERVING in signatures else next(iter(signatures))
            self.serving = self.nodes[signatures[self.key]]
        except _UNREADABLE as exc:
            raise _unreadable(folder, exc) from None


_UNREADABLE = (OSError, ValueError, IndexError, KeyError, StopIteration, UnicodeDecodeError)


def _unreadable(folder: str | Path, exc: BaseException) -> SpecError:
    return SpecError(f"model: {folder}: {PROTO} cannot be read ({type(exc).__name__}: {exc})")


def signature_key(folder: str | Path) -> str:
    """The name of the signature it serves."""
    return _Graph(folder).key


def trainable_params(folder: str | Path) -> int:
    """The elements of the trainable variables its serving signature reads (the nodes its
    concrete function captures that are trainable variables): what TensorFlow's
    `trainable_variables` of that signature counts. (Keras' export records every variable
    twice in the object graph: the graph's variables alone would count them twice.)"""
    graph = _Graph(folder)
    try:
        node = graph.serving
        names = [_sub(bare, 1)[0].decode() for bare in _sub(node, 8)]
        names += [name.decode() for fn in _sub(node, 6) for name in _sub(fn, 1)]
        captured = {i for name in names for i in _ints(_sub(graph.functions[name], 2))}
        total = 0
        for index in captured:
            for variable in _sub(graph.nodes[index], 7):
                fields = dict(_fields(variable))
                if fields.get(3):
                    dims = [dict(_fields(dim)).get(1, 1) for dim in _sub(fields.get(2, b""), 2)]
                    total += math.prod(dims)
    except _UNREADABLE as exc:
        raise _unreadable(folder, exc) from None
    return total


# --- in TensorFlow's worker ---------------------------------------------------------------


def load(folder: str) -> Any:
    import tensorflow as tf

    return read_model(folder, "a SavedModel TensorFlow can load", tf.saved_model.load)


def serving(loaded: Any, folder: str) -> Any:
    """The signature it serves: `serving_default`, or its only one."""
    signatures = dict(loaded.signatures)
    if SERVING in signatures:
        return signatures[SERVING]
    if len(signatures) == 1:
        return next(iter(signatures.values()))
    have = ", ".join(signatures) or "none"
    raise SpecError(
        f"model: {folder}: no {SERVING} signature to serve (it has: {have}); save it with "
        f"signatures={{'{SERVING}': ...}}"
    )


def _inputs(fn: Any, folder: str) -> list[tuple[str, Any]]:
    args, named_specs = fn.structured_input_signature
    if args:
        raise SpecError(
            f"model: {folder}: its serving signature takes unnamed inputs; fwbench feeds a "
            "signature's inputs by name"
        )
    return sorted(named_specs.items())


class Served:
    """A SavedModel's serving signature as TensorFlow's adapter calls a Keras model:
    `model(inputs, training=False)`, the inputs a tensor or a list in the order of their
    names, the outputs in the order of theirs (a tensor when there is one)."""

    def __init__(self, loaded: Any, fn: Any, names: list[str]) -> None:
        self.loaded = loaded  # what owns the variables the signature reads
        self.fn = fn
        self.names = names
        self.trainable_weights = list(fn.trainable_variables)

    def __call__(self, inputs: Any, training: bool = False) -> Any:
        if training:
            raise TypeError("a SavedModel's signature cannot be trained")
        given = list(inputs) if isinstance(inputs, list | tuple) else [inputs]
        out = self.fn(**dict(zip(self.names, given, strict=True)))
        found = [out[k] for k in sorted(out)] if isinstance(out, dict) else [out]
        return found[0] if len(found) == 1 else found


def build(folder: str) -> Served:
    loaded = load(folder)
    fn = serving(loaded, folder)
    return Served(loaded, fn, [name for name, _ in _inputs(fn, folder)])


def describe(spec: ModelSpec) -> dict[str, Any]:
    loaded = load(spec.reference)
    fn = serving(loaded, spec.reference)
    inputs = []
    for name, tensor in _inputs(fn, spec.reference):
        dtype = _DTYPES.get(tensor.dtype.as_datatype_enum)
        if dtype is None or tensor.shape.rank is None:
            what = f"dtype {tensor.dtype.name}" if dtype is None else "no known rank"
            raise SpecError(f"model: {spec.reference}: input {name} has {what}, which fwbench "
                            "cannot make data for")  # fmt: skip
        dims: tuple[int | str | None, ...] = tuple(tensor.shape.as_list())
        if dims and dims[0] is None:
            dims = (BATCH, *dims[1:])  # an open leading dimension: the batch
        inputs.append(TensorSpec(name, dims, dtype))
    outputs = fn.structured_outputs
    names = sorted(outputs) if isinstance(outputs, dict) else []
    return {
        "inputs": format_signature(inputs),
        "params": trainable_params(spec.reference),
        "outputs": ", ".join(names),
    }
