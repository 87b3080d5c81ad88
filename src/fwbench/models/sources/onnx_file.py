"""An ONNX file (`PATH.onnx`): run as it is by the inference runtimes that read ONNX.

Its inputs are its graph's (an initializer is a weight, not an input), each dimension
the graph leaves open (a `dim_param` such as "batch") to be given, the leading one by
the batch size. Its parameters are its initializers' elements: what the file holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fwbench.catalog.inputs import BATCH, TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import (
    digest,
    digest_text,
    existing,
    file_model,
    read_model,
    within,
)

# ONNX's TensorProto element types, by number, as fwbench names them.
_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool",
           10: "float16", 11: "float64", 16: "bfloat16"}  # fmt: skip


def claims(text: str) -> bool:
    return text.lower().endswith(".onnx")


def load(path: str) -> Any:
    """The file's graph (with its external data, if it keeps weights beside it)."""
    import onnx

    return read_model(path, "an ONNX model", onnx.load)


def resolve(text: str) -> ModelSpec:
    path = existing(text, "an ONNX model")
    # Weights kept beside the graph are the model too: every file its tensors name
    # (torch.onnx's FILE.onnx.data, or any others), each checked before it is read.
    parts = [digest(path)]
    for name in external_files(path):
        parts += [name, digest(within(path.parent / name, path.parent))]
    content = parts[0] if len(parts) == 1 else digest_text("\0".join(parts))
    return file_model(
        str(path), content, path.name,
        family="onnx",
        builders={"onnx": lambda **_: load(str(path))},
        description=f"ONNX file {path}",
    )  # fmt: skip


def external_files(path: Path) -> list[str]:
    """The files beside the graph its tensors keep their data in (their `location`s),
    read from the graph alone; in sorted order. Without the onnx package (a command
    that runs no ONNX framework here), torch.onnx's convention: FILE.onnx.data."""
    try:
        import onnx
    except ImportError:
        beside = path.name + ".data"
        return [beside] if (path.parent / beside).is_file() else []

    proto = read_model(str(path), "an ONNX model", lambda p: onnx.load(p, load_external_data=False))
    found: set[str] = set()

    def tensors(graph: Any) -> Iterator[Any]:
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield from (sparse.values, sparse.indices)
        yield from in_nodes(graph.node)

    def in_nodes(nodes: Any) -> Iterator[Any]:
        for node in nodes:
            for attribute in node.attribute:
                if attribute.HasField("t"):
                    yield attribute.t
                yield from attribute.tensors
                for sub in [*([attribute.g] if attribute.HasField("g") else []), *attribute.graphs]:
                    yield from tensors(sub)

    # A model's local functions hold constants too, and onnx.load reads theirs as well.
    every = [tensors(proto.graph), *(in_nodes(function.node) for function in proto.functions)]
    for tensor in (t for found_in in every for t in found_in):
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            found |= {entry.value for entry in tensor.external_data if entry.key == "location"}
    return sorted(found)


def signature(proto: Any) -> tuple[TensorSpec, ...]:
    weights = {init.name for init in proto.graph.initializer}
    found = []
    for value in proto.graph.input:
        if value.name in weights:
            continue
        tensor = value.type.tensor_type
        dtype = _DTYPES.get(tensor.elem_type)
        if dtype is None:
            raise SpecError(
                f"model: input {value.name} has ONNX element type {tensor.elem_type}, which "
                f"fwbench cannot make data for (valid: {', '.join(sorted(set(_DTYPES.values())))})"
            )
        dims: tuple[int | str | None, ...] = tuple(
            d.dim_value if d.dim_value > 0 else None for d in tensor.shape.dim
        )
        if dims and dims[0] is None:
            dims = (BATCH, *dims[1:])  # an open leading dimension: the batch
        found.append(TensorSpec(value.name, dims, dtype))
    return tuple(found)


def describe(spec: ModelSpec) -> dict[str, Any]:
    import numpy as np
    import onnx
    from onnx import numpy_helper

    proto = load(spec.reference)
    try:
        onnx.checker.check_model(proto)
    except Exception as exc:
        raise SpecError(f"model: {spec.reference}: not a valid ONNX model ({exc})") from None
    params = sum(
        int(np.prod(numpy_helper.to_array(init).shape))
        for init in proto.graph.initializer
        if init.data_type in (1, 10, 11, 16)
    )
    outputs = ", ".join(o.name for o in proto.graph.output)
    inputs = signature(proto)
    if not inputs:
        # Nothing to feed: `--input-shape` could not help, and there is no batch to time.
        raise SpecError(
            f"model: {spec.reference}: its graph takes no inputs (it computes constants): "
            "fwbench times a model on the inputs it feeds it"
        )
    return {"inputs": format_signature(inputs), "params": params, "outputs": outputs}
