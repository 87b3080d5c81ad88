"""FLOPs of a traced TensorFlow step, counted from the shapes of its dense ops.

Counts what torch.utils.flop_counter counts, so the two frameworks can be cross-checked:
convolutions (forward and both backward products) and matrix products (MatMul,
BatchMatMul, Einsum), 2 FLOPs per multiply-add. TensorFlow's own profiler registry is not
used for the backward ops: its Conv2DBackprop* formulas count about twice the forward
product. Ops nothing live depends on (the gradient of the input image, the step Keras
runs once to infer an RNN's output shape) are pruned by the runtime, so they are not
counted either. Loops (recurrent layers) count their body once per iteration, with the
trip count read from the loop's constant maximum; called functions count once per call.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np


def _dims(tensor: Any) -> list[int] | None:
    shape = tensor.shape
    if shape.rank is None or any(d is None for d in shape.as_list()):
        return None
    return [int(d) for d in shape.as_list()]


def _conv(out: list[int] | None, kernel: list[int] | None, depthwise: bool) -> float | None:
    """2 x output elements x kernel area x input channels per output (1 if depthwise)."""
    if out is None or kernel is None:
        return None
    kh, kw, cin = kernel[0], kernel[1], kernel[2]
    return 2.0 * math.prod(out) * kh * kw * (1 if depthwise else cin)


def _matmul(op: Any) -> float | None:
    a = _dims(op.inputs[0])
    out = _dims(op.outputs[0])
    if a is None or out is None:
        return None
    ta = op.get_attr("transpose_a") if "transpose_a" in op.node_def.attr else False
    adj = op.get_attr("adj_x") if "adj_x" in op.node_def.attr else False
    k = a[-2] if (ta or adj) else a[-1]
    return 2.0 * math.prod(out) * k


def _counter(op_type: str) -> Callable[[Any], float | None] | None:
    if op_type in ("Conv2D", "DepthwiseConv2dNative"):
        dw = op_type.startswith("Depthwise")
        return lambda op: _conv(_dims(op.outputs[0]), _dims(op.inputs[1]), dw)
    if op_type in ("Conv2DBackpropInput", "DepthwiseConv2dNativeBackpropInput"):
        dw = op_type.startswith("Depthwise")
        return lambda op: _conv(_dims(op.inputs[2]), _dims(op.inputs[1]), dw)
    if op_type in ("Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter"):
        dw = op_type.startswith("Depthwise")
        # The result is the filter's gradient, so it has the filter's shape.
        return lambda op: _conv(_dims(op.inputs[2]), _dims(op.outputs[0]), dw)
    if op_type in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        return _matmul
    if op_type == "Einsum":
        return _einsum
    return None


def _einsum(op: Any) -> float | None:
    """2 x the product of every index's extent: each output element sums over the rest."""
    equation = op.get_attr("equation").decode()
    operands, _, _ = equation.partition("->")
    sizes: dict[str, int] = {}
    for letters, tensor in zip(operands.split(","), op.inputs, strict=False):
        dims = _dims(tensor)
        if dims is None or "." in letters or len(letters) != len(dims):
            return None
        sizes.update(zip(letters, dims, strict=True))
    return 2.0 * math.prod(sizes.values())


_LOOPS = ("While", "StatelessWhile")
_CALLS = ("PartitionedCall", "StatefulPartitionedCall")
# Integer ops that may compute a loop's maximum iterations from constants.
_FOLD: dict[str, Callable[..., Any]] = {
    "Identity": lambda x: x,
    "Max": lambda x, axes: np.max(x, axis=tuple(np.atleast_1d(axes))) if np.size(axes) else x,
    "Min": lambda x, axes: np.min(x, axis=tuple(np.atleast_1d(axes))) if np.size(axes) else x,
    "Maximum": np.maximum,
    "Minimum": np.minimum,
    "Range": np.arange,
}


def _static(tensor: Any) -> Any:
    import tensorflow as tf

    value = tf.get_static_value(tensor)
    if value is not None:
        return value
    fold = _FOLD.get(tensor.op.type)
    if fold is None:
        return None
    args = [_static(t) for t in tensor.op.inputs]
    return None if any(a is None for a in args) else fold(*args)


def _live(graph: Any) -> set[Any]:
    """Ops that the graph's outputs or its side effects (variable updates) depend on."""
    roots = [t.op for t in getattr(graph, "outputs", [])]
    roots += list(getattr(graph, "control_outputs", []))
    roots += [op for op in graph.get_operations() if op.op_def.is_stateful]
    live: set[Any] = set()
    stack = roots
    while stack:
        op = stack.pop()
        if op in live:
            continue
        live.add(op)
        stack.extend(t.op for t in op.inputs)
        stack.extend(op.control_inputs)
    return live


def _function_graph(library: Any, name: str) -> Any:
    found = library._get_function(name)  # the outer graph holds every nested function
    if found is None:
        raise ValueError(f"function {name!r} is not in the traced graph")
    return getattr(found, "graph", None) or found.definition


def _proto_has_dense_ops(library: Any, fdef: Any, seen: set[str]) -> bool:
    """Whether a TF1-style function (tf.nn.ctc_loss defines some), known only as a proto
    without shapes, runs any op this module counts, directly or in a function it calls."""
    for node in fdef.node_def:
        if _counter(node.op) is not None:
            return True
        inner = library._get_function(node.op) if node.op not in seen else None
        if inner is not None:
            seen.add(node.op)
            body = getattr(inner, "graph", None)
            if body is not None or _proto_has_dense_ops(library, inner.definition, seen):
                return True
    return False


def _flops(graph: Any, library: Any, unsized: set[str]) -> float:
    if not hasattr(graph, "get_operations"):  # a function proto: no shapes to count from
        if _proto_has_dense_ops(library, graph, set()):
            unsized.add(f"function {graph.signature.name}")
        return 0.0
    total = 0.0
    live = _live(graph)
    for op in graph.get_operations():
        if op not in live:
            continue
        if op.type in _LOOPS:
            trips = _static(op.inputs[1])  # while_v2: (counter, maximum_iterations, ...)
            body = _function_graph(library, op.get_attr("body").name)
            inner = _flops(body, library, unsized)
            if inner and (trips is None or int(trips) < 0):
                unsized.add(f"{op.type} (unknown trip count)")
            elif inner:
                total += inner * int(trips)
            continue
        if op.type in _CALLS:
            total += _flops(_function_graph(library, op.get_attr("f").name), library, unsized)
            continue
        count = _counter(op.type)
        if count is None:
            continue
        flops = count(op)
        if flops is None:
            unsized.add(op.type)
        else:
            total += flops
    return total


def dense_flops(graph: Any) -> tuple[float, list[str]]:
    """FLOPs of the graph's convolutions and matmuls, and the op types it could not size."""
    unsized: set[str] = set()
    total = _flops(graph, graph, unsized)
    return total, sorted(unsized)
