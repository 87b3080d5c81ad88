"""OpenVINO: the case's PyTorch model exported to ONNX (fwbench.frameworks.onnx_graph),
read and compiled by OpenVINO's CPU plugin. Inference only. A user's ONNX file is read as
it is, and so is a TensorFlow SavedModel: `openvino.convert_model` reads its folder with
OpenVINO's own TensorFlow frontend, without importing TensorFlow (which this worker, with
PyTorch loaded, must not). (Its GPU plugin drives Intel
GPUs, which fwbench has no device name for; the registry entry offers the CPU only.)

Modes are OpenVINO's performance hints: `latency` (one stream: every thread on one
request) and `throughput` (several streams, threads split between them; fwbench sends
one request at a time, so this measures what the hint costs a single caller). The
inference precision is pinned to the case's (the CPU plugin otherwise runs bf16 on CPUs
that have it: fp32 means fp32), and what the compiled model applied is read back and
recorded; a precision the CPU cannot run is recorded unsupported, not silently changed.

The graph it runs is read from the compiled model (`get_runtime_model`: one operation per
executed layer, with its layer type and the names of the source nodes it took in) for the
fusion check: a BatchNormalization that took a convolution's output in the exported graph
must have gone into that convolution (or been folded away), whatever the hint.

OpenVINO is imported inside the methods, not with this module: its import starts a
thread pool, and a fork server (fwbench.launch.forkserver) refuses to fork after that.
"""

from __future__ import annotations

import tempfile
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import torch

from fwbench.case import Case
from fwbench.catalog.inputs import parse_signature
from fwbench.frameworks.onnx_graph import (
    ONNX_FILE,
    SAVED_MODEL,
    Compiled,
    ExportedAdapter,
    RuntimeGraph,
    Unsupported,
    conv_batchnorms,
)

HINTS = {"latency": "LATENCY", "throughput": "THROUGHPUT"}
PRECISIONS = {"fp32": "f32", "bf16": "bf16"}
# Read back from the compiled model, as applied.
RECORDED = (
    "PERFORMANCE_HINT",
    "INFERENCE_PRECISION_HINT",
    "INFERENCE_NUM_THREADS",
    "NUM_STREAMS",
    "ENABLE_CPU_PINNING",
    "SCHEDULING_CORE_TYPE",
)
# Runtime-graph entries that execute nothing: the model's inputs, outputs and weights.
NOT_EXECUTED = {"Input", "Output", "Const"}
# Layers a BatchNorm after a convolution is merged into (as a post-operation).
CONVOLUTIONS = {"Convolution", "Deconvolution"}


class OpenVinoAdapter(ExportedAdapter):
    name = "openvino"
    reads: ClassVar[tuple[str, ...]] = (ONNX_FILE, SAVED_MODEL)

    def unavailable_reason(self, device: str) -> str | None:
        return None  # the CPU plugin is always there; the registry entry offers no other

    def environment(self, device: str) -> dict[str, Any]:
        import openvino as ov

        core = ov.Core()
        return {
            "openvino": ov.get_version(),
            "onnx": onnx.__version__,
            "torch": torch.__version__,
            "openvino_devices": core.available_devices,
            "device_name": str(core.get_property("CPU", "FULL_DEVICE_NAME")),
        }

    def compile(self, proto: onnx.ModelProto, case: Case, feeds: list[np.ndarray]) -> Compiled:
        import openvino as ov

        core = ov.Core()
        with tempfile.TemporaryDirectory(prefix="fwbench-ov-") as folder:
            path = Path(folder) / "model.onnx"
            onnx.save(proto, str(path))
            # Compiled while the file is there: OpenVINO may map weights from it.
            model = core.read_model(str(path))
            return self._compile(core, model, case, dict(enumerate(feeds)), None, proto)

    def compile_file(self, fmt: str, model: Any, case: Case, feeds: list[np.ndarray]) -> Compiled:
        if fmt != SAVED_MODEL:
            return super().compile_file(fmt, model, case, feeds)
        import openvino as ov

        converted = ov.convert_model(str(model))
        # A signature's inputs and outputs are maps: fed by name, and its outputs read in
        # the order of their names, as TensorFlow's adapter takes them.
        names = [tensor.name for tensor in parse_signature(case.inputs or "")]
        outputs = [min(o.get_names() or {""}) for o in converted.outputs]
        order = sorted(range(len(outputs)), key=outputs.__getitem__)
        inputs = dict(zip(names, feeds, strict=True))
        return self._compile(ov.Core(), converted, case, inputs, order)

    def _compile(
        self,
        core: Any,
        model: Any,
        case: Case,
        inputs: dict[Any, np.ndarray],
        order: list[int] | None = None,
        proto: onnx.ModelProto | None = None,
    ) -> Compiled:
        """`model` (an openvino.Model) compiled for the CPU with the case's hint, threads
        and precision; fed `inputs` (by position or name), its outputs read back in `order`
        (the graph's, left out).
        The fusion check looks for the BatchNormalization nodes of `proto`, the ONNX graph
        it came from (none for a model read in another format)."""
        import openvino as ov

        wanted = PRECISIONS[case.precision or "fp32"]
        config = {
            "PERFORMANCE_HINT": HINTS[case.mode],
            "INFERENCE_NUM_THREADS": self.threads,
            "INFERENCE_PRECISION_HINT": wanted,
        }
        compiled = core.compile_model(model, "CPU", config)
        applied = {f"ov_{k.lower()}": _readable(compiled.get_property(k)) for k in RECORDED}
        got = compiled.get_property("INFERENCE_PRECISION_HINT")
        if got != {"f32": ov.Type.f32, "bf16": ov.Type.bf16}[wanted]:
            raise Unsupported(
                f"OpenVINO's CPU plugin runs {_readable(got)} here, not {wanted}: this CPU "
                f"lacks {case.precision or 'fp32'} kernels"
            )
        request = compiled.create_infer_request()
        expected = conv_batchnorms(proto.graph) if proto is not None else []

        def run() -> None:
            # Outputs shared: infer would otherwise copy each into the dict it returns,
            # which nothing reads (output() reads the request's tensors).
            request.infer(inputs, share_inputs=True, share_outputs=True)

        read = order if order is not None else list(range(len(compiled.outputs)))

        def output() -> list[np.ndarray]:
            return [np.asarray(request.get_output_tensor(i).data).copy() for i in read]

        def graph() -> RuntimeGraph:
            layers = [_layer(op) for op in compiled.get_runtime_model().get_ordered_ops()]
            return openvino_runtime_graph(layers, expected)

        return Compiled(run, output, applied, graph=graph)


def openvino_runtime_graph(
    layers: Iterable[tuple[str, str]], expected: Collection[str]
) -> RuntimeGraph:
    """The compiled model's runtime graph, from its layers' (layer type, comma-separated
    names of the source nodes it executes), as a RuntimeGraph.

    `expected` names the exported graph's BatchNormalization nodes that take a
    convolution's output. One left unfused is one whose name a layer other than a
    convolution carries; a fused one is carried by its convolution or gone (folded into
    the weights, where OpenVINO keeps no name)."""
    ops: list[str] = []
    unfused: set[str] = set()
    for kind, names in layers:
        if kind in NOT_EXECUTED:
            continue
        ops.append(kind)
        if kind not in CONVOLUTIONS:
            unfused |= set(expected) & set(names.split(","))
    return RuntimeGraph(tuple(ops), len(unfused))


def _layer(op: Any) -> tuple[str, str]:
    info = op.get_rt_info()
    names = info["originalLayersNames"].astype(str) if "originalLayersNames" in info else ""
    kind = info["layerType"].astype(str) if "layerType" in info else op.get_type_name()
    return str(kind), str(names)


def _readable(value: Any) -> Any:
    """A property as JSON can hold it: OpenVINO types and enums by name."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if hasattr(value, "get_type_name"):  # an openvino.Type
        return value.get_type_name()
    return str(value).split(".")[-1]
