"""ONNX Runtime: the case's PyTorch model exported to ONNX (fwbench.frameworks.onnx_graph)
and run by an InferenceSession on the CPU execution provider. Inference only.

Modes are ONNX Runtime's graph optimisation levels. Execution is sequential (operators one
after another, each parallel over intra_op_num_threads; ONNX Runtime's default), one
inter-op thread, spinning workers between operators (as PyTorch's OpenMP pool does): all
explicit and recorded.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import torch

from fwbench.case import Case
from fwbench.frameworks.onnx_graph import ExportedAdapter, ExportError

LEVELS: dict[str, ort.GraphOptimizationLevel] = {
    "optimized": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "unoptimized": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
}
SPINNING = "1"


class OnnxRuntimeAdapter(ExportedAdapter):
    name = "onnxruntime"

    def unavailable_reason(self, device: str) -> str | None:
        if device != "cpu":
            return "fwbench runs ONNX Runtime's CPU execution provider only, so far"
        return None

    def environment(self, device: str) -> dict[str, Any]:
        return {
            "onnxruntime": ort.__version__,
            "onnx": onnx.__version__,
            "torch": torch.__version__,
            "providers": ort.get_available_providers(),
            "device_name": "cpu",
        }

    def compile(
        self, proto: onnx.ModelProto, case: Case, feeds: list[np.ndarray]
    ) -> tuple[Callable[[], Any], dict[str, Any]]:
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = LEVELS[case.mode]
        options.add_session_config_entry("session.intra_op.allow_spinning", SPINNING)
        options.log_severity_level = 3  # errors only: its warnings are about its optimiser
        session = ort.InferenceSession(
            proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        names = [i.name for i in session.get_inputs()]
        if len(names) != len(feeds):
            raise ExportError(f"the graph takes {len(names)} inputs; the model {len(feeds)}")
        by_name = dict(zip(names, feeds, strict=True))

        def run() -> Any:
            return session.run(None, by_name)[0]

        return run, {
            "graph_optimization_level": str(options.graph_optimization_level).split(".")[-1],
            "execution_mode": "ORT_SEQUENTIAL",
            "intra_op_allow_spinning": SPINNING,
            "providers": session.get_providers(),
        }
