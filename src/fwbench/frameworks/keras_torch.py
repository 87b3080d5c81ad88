"""Keras 3 on its PyTorch backend (framework `keras-torch`): the Keras models, stepped
eagerly with PyTorch's autograd and Keras' optimizer, as Keras' own `fit` does there.

With keras-jax and tensorflow (Keras 3 on TensorFlow) this reproduces the Keras 3
backend benchmark: one model definition, three backends.
"""

from __future__ import annotations

import os
from typing import Any

os.environ["KERAS_BACKEND"] = "torch"  # read once, when keras is first imported

import numpy as np

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec
from fwbench.explain.timeline import Event, Window
from fwbench.frameworks.base import OutputCheck, Workload
from fwbench.frameworks.generation import GenerateWorkload
from fwbench.frameworks.keras_common import (
    KerasBackendAdapter,
    KerasLora,
    as_array,
    count_trainable,
    keras_module,
    make_optimizer,
    objective,
    synthetic_inputs,
)
from fwbench.tasks import get_task


class KerasTorchWorkload(Workload):
    def __init__(self, model: Any, case: Case, spec: ModelSpec) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.param_count = count_trainable(model)
        rng = np.random.default_rng(0)
        self.x = synthetic_inputs(case, spec)
        self.y, self.loss_fn = objective(case, case.loss, rng)
        self.optimizer: Any = None
        if get_task(case.task).trains:
            self.optimizer = make_optimizer(spec.optimizer)
            self.optimizer.build(model.trainable_variables)
        self.on_gpu = case.device == "cuda"
        self.settings_: dict[str, Any] = {}
        self.check = OutputCheck(case, spec.objective, as_array)

    def step(self) -> None:
        torch = self.torch
        if self.optimizer is None:
            with torch.inference_mode():
                out = self.model(self.x, training=False)
            if self.check.pending:
                self.check(out)
            return
        logits = self.model(self.x, training=True)
        loss = self.loss_fn(self.y, logits)
        self.model.zero_grad()
        loss.backward()
        variables = self.model.trainable_variables
        grads = [v.value.grad for v in variables]
        with torch.no_grad():
            self.optimizer.apply(grads, variables)

    def sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def settings(self) -> dict[str, Any]:
        return self.settings_


class KerasTorchLora(KerasLora, KerasTorchWorkload):
    """Task lora: keras-hub's adapters, trained as KerasTorchWorkload trains."""


class KerasTorchAdapter(KerasBackendAdapter):
    name = "keras-torch"

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        import torch

        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
        keras = keras_module()
        return {
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "keras_backend": keras.backend.backend(),
            "inference_grad_mode": "torch.inference_mode",
        }

    def build(self, case: Case) -> Workload:
        from fwbench.frameworks.torch import pin_cuda_numerics

        # Keras sets none of PyTorch's numerics: its default ran fp32 convolutions in
        # TF32 on a GPU, beside frameworks pinned to fp32.
        pinned = pin_cuda_numerics(case)
        workload: Any = super().build(case)
        workload.settings_ = {**getattr(workload, "settings_", {}), **pinned}
        built: Workload = workload
        return built

    def unavailable_reason(self, device: str) -> str | None:
        import torch

        if device == "cuda" and not torch.cuda.is_available():
            return "PyTorch sees no CUDA device on this machine"
        return None

    def environment(self, device: str) -> dict[str, Any]:
        import torch

        keras = keras_module()
        return {"torch": torch.__version__, "keras": keras.__version__}

    def is_oom(self, exc: BaseException) -> bool:
        import torch

        return isinstance(exc, torch.OutOfMemoryError) or "not enough memory" in str(exc)

    def reset_device_memory(self, device: str) -> None:
        from fwbench.frameworks.torch import reset_cuda_peaks

        reset_cuda_peaks(device)

    def device_memory(self, device: str) -> dict[str, int] | None:
        from fwbench.frameworks.torch import cuda_peaks

        return cuda_peaks(device)

    def profile(
        self, workload: Workload, steps: int, trace_path: str | None
    ) -> tuple[str, list[Event], Window, str | None]:
        # Keras on PyTorch runs PyTorch's ops: PyTorch's profiler reads them.
        from fwbench.frameworks.torch import profile_torch

        assert isinstance(workload, KerasTorchWorkload | GenerateWorkload)
        return profile_torch(workload, workload.on_gpu, steps, trace_path)
