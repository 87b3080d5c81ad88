"""FLOPs of a traced TensorFlow step, counted from the shapes of its dense ops.

Counts what torch.utils.flop_counter counts, so the two frameworks can be cross-checked:
convolutions (forward and both backward products) and matrix products, 2 FLOPs per
multiply-add. TensorFlow's own profiler registry is not used for the backward ops: its
Conv2DBackprop* formulas count about twice the forward product. An op whose result
nobody consumes (the gradient of the input image) is pruned by the runtime, so it is
not counted here either.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


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
    return None


def dense_flops(graph: Any) -> tuple[float, list[str]]:
    """FLOPs of the graph's convolutions and matmuls, and the op types it could not size."""
    total = 0.0
    unsized: set[str] = set()
    for op in graph.get_operations():
        count = _counter(op.type)
        if count is None or not any(out.consumers() for out in op.outputs):
            continue
        flops = count(op)
        if flops is None:
            unsized.add(op.type)
        else:
            total += flops
    return total, sorted(unsized)
