"""ONNX Runtime: the case's PyTorch model exported to ONNX (fwbench.frameworks.onnx_graph)
and run by an InferenceSession on the case's execution provider. Inference only.

The provider follows from the case: the CPU provider on `cpu`; on `cuda`, the CUDA
provider, or TensorRT's (nodes it cannot take fall back to CUDA) in mode `tensorrt`. The
other modes are ONNX Runtime's graph optimisation levels. A session that did not get the
provider asked for (ONNX Runtime falls back to the CPU with a log line when a GPU
provider fails to load) is refused, never measured on the wrong device.

On the CPU: sequential execution (operators one after another, each parallel over
intra_op_num_threads; ONNX Runtime's default), one inter-op thread, spinning workers
between operators (as PyTorch's OpenMP pool does). On a GPU the inputs are bound on the
device once and the outputs stay there (I/O binding), as a torch case's tensors do, so
the steady state holds no host copies; fp32 is IEEE fp32 (`use_tf32` off) unless the
case asks for tf32, and cuDNN's convolution search follows the case's autotune, as
PyTorch's cudnn.benchmark does. Every option is explicit and recorded.

The graph the session runs is read back (a second session with the same options saves
its optimised graph; outside compile_s) for the fusion check (fwbench.frameworks.
onnx_graph.fusion_settings). It applies at `optimized` and at `basic`: folding a
BatchNorm into the convolution before it is one of ORT_ENABLE_BASIC's rewrites. It does
not apply at `unoptimized`, which runs the graph as exported, nor to TensorRT, whose
engines ONNX Runtime cannot save.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from fwbench.case import Case
from fwbench.errors import one_line
from fwbench.frameworks.onnx_graph import (
    Compiled,
    ExportedAdapter,
    ExportError,
    RuntimeGraph,
    Unsupported,
    onnx_runtime_graph,
)

LEVELS: dict[str, ort.GraphOptimizationLevel] = {
    "optimized": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "unoptimized": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "tensorrt": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
# Intra-op threads spin between operators (ONNX Runtime's default, and what PyTorch's
# OpenMP pool does) unless the case sets `options: spinning=off`.
SPINNING = {"on": "1", "off": "0"}


def spinning(case: Case) -> str:
    return SPINNING[str(case.setting_value("spinning"))]


CPU, CUDA, TENSORRT = "CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider"
# What a GPU provider is called in a reason, and what brings it.
NEEDS = {
    CUDA: ("CUDA execution provider", "install onnxruntime-gpu"),
    TENSORRT: ("TensorRT execution provider", "install onnxruntime-gpu and TensorRT"),
}


def lacking(provider: str) -> str | None:
    """Why this onnxruntime cannot give a session `provider`, or None when it can."""
    have = ort.get_available_providers()
    if provider in have:
        return None
    name, hint = NEEDS.get(provider, (provider, "install an onnxruntime that has it"))
    return f"this onnxruntime {ort.__version__} has no {name} (it has {', '.join(have)}): {hint}"


def providers(case: Case) -> list[tuple[str, dict[str, str]]]:
    """The execution providers a case asks for, first choice first, with their options."""
    if case.device != "cuda":
        return [(CPU, {})]
    cuda = {
        "device_id": "0",
        "use_tf32": "1" if case.precision == "tf32" else "0",
        # cudnn.benchmark off in PyTorch means cuDNN's heuristics, not its fixed default.
        "cudnn_conv_algo_search": "EXHAUSTIVE" if case.autotune else "HEURISTIC",
    }
    if case.mode == "tensorrt":
        return [(TENSORRT, {"device_id": "0"}), (CUDA, cuda)]
    return [(CUDA, cuda)]


class OnnxRuntimeAdapter(ExportedAdapter):
    name = "onnxruntime"

    def unavailable_reason(self, device: str) -> str | None:
        return lacking(CUDA) if device == "cuda" else None

    def environment(self, device: str) -> dict[str, Any]:
        on_gpu = device == "cuda" and torch.cuda.is_available()
        return {
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "torch": torch.__version__,
            "providers": ort.get_available_providers(),
            "device_name": torch.cuda.get_device_name(0) if on_gpu else "cpu",
        }

    def compile(self, proto: onnx.ModelProto, case: Case, feeds: list[np.ndarray]) -> Compiled:
        wanted = providers(case)
        first = wanted[0][0]
        if reason := lacking(first):  # TensorRT's: unavailable_reason has checked CUDA's
            raise Unsupported(reason)
        options = session_options(case, self.threads)
        session = ort.InferenceSession(
            proto.SerializeToString(),
            options,
            providers=[name for name, _ in wanted],
            provider_options=[opts for _, opts in wanted],
        )
        got = session.get_providers()
        if got[0] != first:
            raise Unsupported(f"ONNX Runtime gave the session {got[0]}, not {first}")
        names = [i.name for i in session.get_inputs()]
        if len(names) != len(feeds):
            raise ExportError(f"the graph takes {len(names)} inputs; the model {len(feeds)}")
        applied: dict[str, Any] = {
            "graph_optimization_level": str(options.graph_optimization_level).split(".")[-1],
            "execution_mode": "ORT_SEQUENTIAL",
            "intra_op_allow_spinning": spinning(case),
            "providers": got,
        }

        def graph() -> RuntimeGraph | str:
            return optimized_graph(proto, case, self.threads)

        if case.device != "cuda":
            by_name = dict(zip(names, feeds, strict=True))
            last: list[np.ndarray] = []

            def run() -> None:
                last[:] = session.run(None, by_name)

            return Compiled(run, lambda: list(last), applied, graph=graph)
        compiled = _bound(session, names, feeds, applied | _provider_options(session, got))
        compiled.graph = graph
        return compiled


def session_options(case: Case, threads: int) -> ort.SessionOptions:
    """The session's options for the case, every one explicit."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = LEVELS[case.mode]
    options.add_session_config_entry("session.intra_op.allow_spinning", spinning(case))
    options.log_severity_level = 3  # errors only: its warnings are about its optimiser
    return options


def optimized_graph(proto: onnx.ModelProto, case: Case, threads: int) -> RuntimeGraph | str:
    """The graph a session of the case runs after ONNX Runtime's optimisation, or why it
    cannot be read.

    A second session with the case's options and providers saves it: saving from the
    measured session would put the writing of every weight into compile_s. The graph is
    the same, since ONNX Runtime's rewrites depend only on the graph, the level, the
    providers and this CPU."""
    if case.mode == "tensorrt":
        return "TensorRT builds its own engines from the graph, which ONNX Runtime cannot save"
    unchecked = None
    if case.mode == "unoptimized":
        unchecked = "mode unoptimized (ORT_DISABLE_ALL) runs the graph as exported"
    wanted = providers(case)
    options = session_options(case, threads)
    try:
        with tempfile.TemporaryDirectory(prefix="fwbench-ort-") as folder:
            options.optimized_model_filepath = str(Path(folder) / "optimized.onnx")
            ort.InferenceSession(
                proto.SerializeToString(),
                options,
                providers=[name for name, _ in wanted],
                provider_options=[opts for _, opts in wanted],
            )
            saved = onnx.load(options.optimized_model_filepath, load_external_data=False)
    except Exception as exc:  # a diagnostic: its failure is recorded, the case still runs
        return f"ONNX Runtime did not save its optimised graph: {one_line(exc)}"
    return onnx_runtime_graph(saved, unchecked)


def _bound(
    session: ort.InferenceSession,
    names: list[str],
    feeds: list[np.ndarray],
    applied: dict[str, Any],
) -> Compiled:
    """The session with its inputs copied to the GPU once and its outputs kept there."""
    binding = session.io_binding()
    on_device = [ort.OrtValue.ortvalue_from_numpy(feed, "cuda", 0) for feed in feeds]
    for name, value in zip(names, on_device, strict=True):
        binding.bind_ortvalue_input(name, value)
    for out in session.get_outputs():
        binding.bind_output(out.name, "cuda", 0)

    def run() -> None:
        session.run_with_iobinding(binding)

    def output() -> list[np.ndarray]:
        return [np.asarray(o) for o in binding.copy_outputs_to_cpu()]

    applied |= {"io_binding": "cuda"}
    return Compiled(run, output, applied, binding.synchronize_outputs, holds=tuple(on_device))


def _provider_options(session: ort.InferenceSession, got: list[str]) -> dict[str, Any]:
    """The GPU providers' options as the session applied them."""
    applied = session.get_provider_options()
    keep = ("use_tf32", "cudnn_conv_algo_search", "device_id", "trt_fp16_enable")
    return {
        f"ort_{name.removesuffix('ExecutionProvider').lower()}_{key}": value
        for name in got
        if name != CPU
        for key, value in applied.get(name, {}).items()
        if key in keep
    }
