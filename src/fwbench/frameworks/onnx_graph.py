"""ONNX graphs of the zoo's PyTorch models, and what every inference runtime that runs
them shares (fwbench.frameworks.onnxruntime, .openvino): the export, the same-work checks,
and `ExportedAdapter`, so a runtime is only its session.

The graph comes from the same PyTorch model (same builder, same random weights) that a
torch case of the same shape measures, exported as a user deploys it: torch.onnx's
torch.export-based exporter with its graph optimiser on (its default), which folds
constants and BatchNorm into the convolutions. (With the optimiser off, every bias-free
convolution kept a run-time zero bias that ONNX Runtime could not fold, so none of its
fusions applied and the runtime measured a graph no deployment runs.) After the runtime
has compiled the graph, the graph it runs is read back, its operations are counted and
the fusions a deployment expects are checked: a BatchNormalization still run after a
convolution makes the result different work.

Parameters are the source model's trainable count: the folded graph has no BatchNorm
weights of its own. Export and compile are timed apart from the steady state. The
runtime's outputs are compared with PyTorch's on one batch, so a fast but wrong export
is flagged.

Imported inside workers only (it imports torch and onnx).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import time
import warnings
from abc import abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import onnx
import torch

from fwbench.case import Case
from fwbench.catalog.inputs import arrays, parse_signature
from fwbench.catalog.models import get_model
from fwbench.frameworks.agreement import within
from fwbench.frameworks.base import Adapter, Workload, output_sample, tensors_in, workload_class
from fwbench.frameworks.torch import count_trainable, synthetic_inputs
from fwbench.models.sources.saved_model import FOLDER, trainable_params

# A user's file that a runtime compiles as it is, by the builder key its source gives it:
# an ONNX file's (fwbench.models.sources.onnx_file) returns the graph, a ModelProto; a
# SavedModel's (.saved_model) its folder, a Path. A runtime compiles the formats it
# reads (ExportedAdapter.reads); a model of any other source it gets exported from
# PyTorch.
ONNX_FILE = "onnx"
SAVED_MODEL = FOLDER

# Outputs must agree with PyTorch's fp32 outputs within this share of the largest output:
# fp32 kernels reorder sums; bf16 keeps 8 bits of mantissa (a relative step of 2^-8, and
# errors add up over layers); a wrong export is off by far more.
TOLERANCE = {"fp32": 1e-3, "tf32": 1e-2, "bf16": 5e-2}


class Unsupported(RuntimeError):
    """The runtime cannot run this case here: recorded `unsupported` with the reason."""


class ExportError(Unsupported):
    """The model does not export to ONNX: a property of the model."""


# What torch.onnx.export does when a user calls it with no options (torch >= 2.9):
# the torch.export-based exporter, then its optimiser (constant folding, BatchNorm folded
# into convolutions, redundant nodes removed). Given explicitly so that a change of the
# exporter's defaults does not change fwbench's graphs unseen; recorded in the settings.
EXPORT_OPTIONS: dict[str, Any] = {"dynamo": True, "optimize": True}


def export(model: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> onnx.ModelProto:
    model.eval()
    try:
        # The exporter prints its progress and warns about its own internals.
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(model, inputs, **EXPORT_OPTIONS)
    except Exception as exc:
        raise ExportError(f"torch.onnx.export failed: {type(exc).__name__}: {exc}") from exc
    if program is None:
        raise ExportError("torch.onnx.export returned no program")
    proto: onnx.ModelProto = program.model_proto
    return proto


def exporter(proto: onnx.ModelProto) -> str:
    """How the graph was made, for the result's settings."""
    options = ", ".join(f"{k}={v}" for k, v in EXPORT_OPTIONS.items())
    opsets = [o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")]
    return f"torch.onnx.export({options}), opset {opsets[0] if opsets else '?'}"


def graph_params(proto: onnx.ModelProto) -> int:
    """Floating-point initializers of the graph, less BatchNorm running statistics.

    Informational only: the exporter folds BatchNorm into the convolutions, so an exported
    CNN holds fewer numbers than PyTorch's trainable parameters (ResNet-50: 0.2% fewer);
    parity is taken from the source model (`count_trainable`)."""
    stats = {
        name
        for node in proto.graph.node
        if node.op_type == "BatchNormalization"
        for name in node.input[3:5]
    }
    floating = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16}
    return sum(
        math.prod(t.dims)
        for t in proto.graph.initializer
        if t.data_type in floating and t.name not in stats
    )


def _shapes(proto: onnx.ModelProto) -> dict[str, list[int]]:
    inferred = onnx.shape_inference.infer_shapes(proto, data_prop=True)
    found: dict[str, list[int]] = {}
    values = [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]
    for v in values:
        dims = v.type.tensor_type.shape.dim
        if all(d.HasField("dim_value") for d in dims):
            found[v.name] = [d.dim_value for d in dims]
    for t in proto.graph.initializer:
        found[t.name] = list(t.dims)
    return found


# Recurrent operators hide their products inside one node; counting them here would be
# a second FLOP definition. Models with them get no count, and say why.
_UNCOUNTED = {"LSTM", "GRU", "RNN", "Loop", "Scan", "If"}


def graph_flops(proto: onnx.ModelProto) -> float:
    """FLOPs of one forward pass: convolutions and matrix products (2 per multiply-add),
    as PyTorch's counter defines them; elementwise operations are not counted."""
    shapes = _shapes(proto)
    total = 0
    for node in proto.graph.node:
        if node.op_type in _UNCOUNTED:
            raise ValueError(f"the graph has a {node.op_type} node, which is not counted")
        if node.op_type not in ("Conv", "MatMul", "Gemm"):
            continue
        out = shapes.get(node.output[0])
        a = shapes.get(node.input[0])
        b = shapes.get(node.input[1])
        if out is None or a is None or b is None:
            raise ValueError(f"no static shape for {node.op_type} node {node.name!r}")
        if node.op_type == "Conv":
            # weight: out_channels x in_channels/groups x kernel...
            total += 2 * math.prod(out) * math.prod(b[1:])
        elif node.op_type == "MatMul":
            total += 2 * math.prod(out) * a[-1]
        else:
            trans_a = any(at.name == "transA" and at.i for at in node.attribute)
            total += 2 * math.prod(out) * (a[0] if trans_a else a[-1])
    return float(total)


def conv_batchnorms(graph: onnx.GraphProto) -> list[str]:
    """Names of the BatchNormalization nodes that take a convolution's output: the ones an
    inference graph folds into that convolution's weights and bias. (A BatchNorm after
    anything else, e.g. on the input, has no convolution to go into.)"""
    # Conv, ONNX Runtime's FusedConv and NCHWc Conv, NhwcConv.
    made_by_conv = {
        out for node in graph.node if node.op_type.endswith("Conv") for out in node.output
    }
    return [
        node.name or f"#{i}"
        for i, node in enumerate(graph.node)
        if node.op_type == "BatchNormalization" and node.input and node.input[0] in made_by_conv
    ]


@dataclass(frozen=True)
class RuntimeGraph:
    """The graph as a runtime runs it, after its own optimisation."""

    ops: tuple[str, ...]  # the type of every operation it executes (no constants, no I/O)
    unfused_batchnorms: int  # BatchNorm after a convolution still run as its own operation
    # Why the fusion check does not apply (a mode that turns optimisation off), or None.
    unchecked: str | None = None


def onnx_runtime_graph(optimized: onnx.ModelProto, unchecked: str | None = None) -> RuntimeGraph:
    """An optimised ONNX graph (as ONNX Runtime saves it) as a RuntimeGraph. Operators of
    other domains are named by the domain's last part: `nchwc.Conv`, `microsoft.FusedConv`."""
    ops = tuple(
        f"{n.domain.rsplit('.', 1)[-1]}.{n.op_type}"
        if n.domain not in ("", "ai.onnx")
        else n.op_type
        for n in optimized.graph.node
    )
    return RuntimeGraph(ops, len(conv_batchnorms(optimized.graph)), unchecked)


def top_ops(ops: Iterable[str], top: int = 5) -> str:
    """The most frequent operation types, most frequent first: `nchwc.Conv 53, Gemm 1`."""
    return ", ".join(f"{op} {n}" for op, n in Counter(ops).most_common(top))


def fusion_settings(graph: RuntimeGraph | str, batchnorms: int) -> dict[str, Any]:
    """What the result records of the runtime's graph, and the fusion check's verdict.

    `graph` is the graph the runtime runs, or why it could not be read; `batchnorms` the
    source model's BatchNorm layers. A failed check comes with a warning line; the result
    counts as different work (fwbench.result.Result.different_work reads the verdict)."""
    if isinstance(graph, str):
        return {"fusion_check": f"not read: {graph}"}
    found: dict[str, Any] = {"optimized_nodes": len(graph.ops), "optimized_ops": top_ops(graph.ops)}
    if graph.unchecked:
        return found | {"fusion_check": f"not applicable: {graph.unchecked}"}
    if batchnorms == 0 and graph.unfused_batchnorms == 0:
        return found | {"fusion_check": "not applicable: the model has no BatchNorm"}
    if graph.unfused_batchnorms == 0:
        return found | {"fusion_check": "passed: no BatchNormalization left after a convolution"}
    n = graph.unfused_batchnorms
    return found | {
        "fusion_check": f"failed: {n} BatchNormalization left after a convolution",
        "warnings": [
            f"the runtime's optimised graph still runs {n} BatchNormalization after a "
            "convolution as operations of their own (not folded into its weights): not the "
            "graph a deployment runs, so this is different work"
        ],
    }


def agreement(
    source: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    run: Callable[[], Any],
    precision: str = "fp32",
) -> dict[str, Any]:
    """The runtime's first output (`run()`) against PyTorch's on the same batch."""
    with torch.inference_mode():
        # A tensor, a tuple, a dict or a transformers output object: its first tensor, as
        # torch.onnx orders the graph's outputs.
        found = tensors_in(source(*inputs))
    if not found:
        raise ExportError("the model returned no tensor to compare the export's output with")
    want = found[0].float().numpy()
    got = np.asarray(run(), dtype=np.float32)
    return within(got, want, TOLERANCE[precision], "PyTorch", precision, "the export")


def _nothing() -> None:
    pass


def _unread() -> RuntimeGraph | str:
    return "the runtime gives no optimised graph"


@dataclass
class Compiled:
    """A runtime's compiled graph, as the workload and the output check use it."""

    run: Callable[[], Any]  # one batch, inputs already where the runtime reads them
    output: Callable[[], list[np.ndarray]]  # the last run's outputs, in order, on the host
    applied: dict[str, Any]  # the options in force, for the result's settings
    # Waits for the device; a CPU runtime's call returns when its outputs are written.
    sync: Callable[[], None] = field(default=_nothing)
    # What the runtime reads by address (inputs bound on a device): alive while this is.
    holds: tuple[Any, ...] = ()
    # The graph as the runtime runs it, or why it cannot be read. Called once after the
    # compile is timed, so reading it (a second session, a file) is not in compile_s.
    graph: Callable[[], RuntimeGraph | str] = field(default=_unread)


class GraphWorkload(Workload):
    """Inference through a compiled graph (from an ONNX graph, or None: a file the runtime
    read in another format)."""

    def __init__(self, compiled: Compiled, proto: onnx.ModelProto | None, param_count: int) -> None:
        self.compiled = compiled
        self.proto = proto
        self.param_count = param_count  # the source model's: see graph_params
        self.settings_: dict[str, Any] = {}
        # A user's model's outputs: summarised for its result, whole for the check.
        self.sample: dict[str, Any] | None = None
        self.arrays: list[np.ndarray] | None = None

    def output_sample(self) -> dict[str, Any] | None:
        return self.sample

    def output_arrays(self) -> list[np.ndarray] | None:
        return self.arrays

    def keep_outputs(self) -> list[np.ndarray]:
        """Run the graph twice on its inputs and keep a user's model's outputs (the
        check across frameworks reads them, and whether the two runs agreed); the
        first run's outputs."""
        found = self.run_once()
        self.arrays = found
        self.sample = output_sample(found, again=self.run_once())
        return found

    def run_once(self) -> list[np.ndarray]:
        self.compiled.run()
        self.compiled.sync()
        return self.compiled.output()

    def step(self) -> None:
        self.compiled.run()

    def sync(self) -> None:
        self.compiled.sync()

    def settings(self) -> dict[str, Any]:
        return self.settings_


class ExportedAdapter(Adapter):
    """A runtime that runs the exported graph: subclasses compile it and say how."""

    # The formats of a user's file it compiles as they are (see ONNX_FILE).
    reads: ClassVar[tuple[str, ...]] = (ONNX_FILE,)

    def __init__(self) -> None:
        self.threads = 1

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        self.threads = threads
        torch.set_num_threads(threads)  # PyTorch runs the export and the reference outputs
        return {"intra_op_threads": threads, "inter_op_threads": 1}

    @abstractmethod
    def compile(self, proto: onnx.ModelProto, case: Case, feeds: list[np.ndarray]) -> Compiled:
        """The runtime's compiled graph for the case's device, with `feeds` (host arrays)
        placed where its steady state reads them."""

    def compile_file(self, fmt: str, model: Any, case: Case, feeds: list[np.ndarray]) -> Compiled:
        """A user's file in one of the formats it `reads`, compiled as it is (`model` is
        what its source's builder of that format returned). Every runtime reads ONNX; one
        that reads another format compiles it here."""
        return self.compile(model, case, feeds)

    def file_format(self, model: str) -> str | None:
        """The format in which it compiles the model as it is, or None: the model is
        exported from PyTorch."""
        builders = get_model(model).builders
        return next((fmt for fmt in self.reads if fmt in builders), None)

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        """The source PyTorch model: parity is its trainable count (no export needed); a
        user's file it reads as it is: that file (an ONNX graph, a SavedModel's folder)."""
        return get_model(model).build(self.file_format(model) or self.name, dims)

    def count_params(self, model: Any) -> int:
        if isinstance(model, onnx.ModelProto):
            return graph_params(model)
        if isinstance(model, Path):  # a SavedModel: what its serving signature trains
            return trainable_params(model)
        return count_trainable(model)

    def build(self, case: Case) -> Workload:
        # The task's workload class (the registry entry's map; the runtimes implement
        # inference only), constructed as cls(compiled, proto, params).
        cls = workload_class(self.name, case)
        spec = case.model_spec
        fmt = self.file_format(case.reference)
        if fmt is not None:
            return self._from_file(cls, case, fmt)
        source = spec.build(self.name, case.dims).eval()
        inputs = synthetic_inputs(case, spec, torch.device("cpu"))
        start = time.perf_counter()
        with torch.no_grad():
            proto = export(source, inputs)
        export_s = time.perf_counter() - start
        start = time.perf_counter()
        compiled = self.compile(proto, case, [t.numpy() for t in inputs])
        compile_s = time.perf_counter() - start
        params = count_trainable(source)
        workload = cls(compiled, proto, params)
        norms = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
        batchnorms = sum(isinstance(m, norms) for m in source.modules())
        graph = compiled.graph()
        # A model whose normalisation exports as other operations says so (a Keras
        # model's): the check would pass without having looked at it.
        why = getattr(source, "fusion_unchecked", None)
        if why and isinstance(graph, RuntimeGraph) and graph.unchecked is None:
            graph = dataclasses.replace(graph, unchecked=why)
        fusions = fusion_settings(graph, batchnorms)

        def first_output() -> np.ndarray:
            # A user's model's outputs are kept for the check across variants.
            found = workload.keep_outputs() if case.inputs is not None else workload.run_once()
            first: np.ndarray = found[0]
            return first

        checked = agreement(source, inputs, first_output, case.precision or "fp32")
        warned = [*checked.pop("warnings", []), *fusions.pop("warnings", [])]
        workload.settings_ = {
            "precision": case.precision or "fp32",
            "layout": "channels_first",
            "exporter": exporter(proto),
            "export_s": export_s,
            "compile_s": compile_s,
            "source_params": params,
            "graph_params": graph_params(proto),
            "source_batchnorms": batchnorms,
            "graph_batchnorms": sum(n.op_type == "BatchNormalization" for n in proto.graph.node),
            "graph_nodes": len(proto.graph.node),
            **fusions,
            **compiled.applied,
            **checked,
            **({"warnings": warned} if warned else {}),
        }
        built: Workload = workload
        return built

    def _from_file(self, cls: type[Any], case: Case, fmt: str) -> Workload:
        """A user's file, compiled as it is: nothing to export, no PyTorch model to check
        it against here (the check across variants compares the frameworks' outputs on
        the same inputs); its parameters what the file holds (an ONNX graph's
        initializers, a SavedModel's trainable variables)."""
        spec = case.model_spec
        start = time.perf_counter()
        model = spec.build(fmt, {})
        load_s = time.perf_counter() - start
        feeds = arrays(parse_signature(case.inputs or ""), case.batch_size)
        start = time.perf_counter()
        compiled = self.compile_file(fmt, model, case, feeds)
        compile_s = time.perf_counter() - start
        proto = model if isinstance(model, onnx.ModelProto) else None
        params = self.count_params(model)
        workload = cls(compiled, proto, params)
        workload.keep_outputs()
        graph = {"graph_params": params}
        if proto is not None:
            graph["graph_nodes"] = len(proto.graph.node)
        workload.settings_ = {
            "precision": case.precision or "fp32",
            "model_format": fmt,
            "load_s": load_s,
            "compile_s": compile_s,
            **graph,
            **compiled.applied,
        }
        built: Workload = workload
        return built

    def count_flops(self, workload: Workload) -> tuple[float, str]:
        assert isinstance(workload, GraphWorkload)
        if workload.proto is None:
            raise ValueError("fwbench counts FLOPs of ONNX graphs only; this file is not one")
        return graph_flops(workload.proto), "ONNX graph (Conv, MatMul, Gemm; static shapes)"

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError) or "bad_alloc" in str(exc)

    def is_unsupported(self, exc: BaseException) -> bool:
        return isinstance(exc, Unsupported)

    def reset_device_memory(self, device: str) -> None:
        pass

    def device_memory(self, device: str) -> dict[str, int] | None:
        return None
