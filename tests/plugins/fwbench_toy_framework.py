"""A toy framework added in one module, as docs/adding-a-framework.md describes.

`numpy` runs a two-layer perceptron's forward pass with NumPy matrix products: enough
to be measured, compared with PyTorch on the same model, shown in reports, and refused
for what it cannot do (train, count FLOPs, be explained, measure a peak). The module
registers its framework and the one model it implements; nothing else in fwbench
changes. Loaded through FWBENCH_PLUGINS by tests/frameworks/test_plugin_framework.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from fwbench.case import Case
from fwbench.catalog.frameworks import NO, FrameworkInfo, register_framework
from fwbench.catalog.models import ModelSpec, register
from fwbench.frameworks.base import Adapter, Workload, synthetic_arrays, workload_class

HIDDEN = 64


def _numpy_mlp(num_classes: int, input_size: int) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    features = 3 * input_size * input_size
    return [
        rng.standard_normal((features, HIDDEN), dtype=np.float32) * 0.01,
        np.zeros(HIDDEN, dtype=np.float32),
        rng.standard_normal((HIDDEN, num_classes), dtype=np.float32) * 0.01,
        np.zeros(num_classes, dtype=np.float32),
    ]


def _torch_mlp(num_classes: int, input_size: int) -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(3 * input_size * input_size, HIDDEN),
        nn.ReLU(),
        nn.Linear(HIDDEN, num_classes),
    )


register(
    ModelSpec(
        name="toy_mlp",
        family="test",
        input_kind="image",
        default_input_size=8,
        min_input_size=1,
        builders={"torch": _torch_mlp, "numpy": _numpy_mlp},
        description="two dense layers (the toy framework's model; tests only)",
    )
)


class Forward(Workload):
    """`infer`: the perceptron's forward pass."""

    def __init__(self, weights: list[np.ndarray], batch: np.ndarray, case: Case) -> None:
        self.weights = weights
        self.batch = batch
        self.param_count = sum(w.size for w in weights)

    def step(self) -> None:
        w1, b1, w2, b2 = self.weights
        hidden = np.maximum(self.batch @ w1 + b1, 0.0)
        self.out = hidden @ w2 + b2

    def sync(self) -> None:
        pass  # NumPy returns when the product is done

    def settings(self) -> dict[str, Any]:
        return {"precision": "fp32", "layout": "channels_first"}


class NumpyAdapter(Adapter):
    name = "numpy"

    def __init__(self) -> None:
        # FWBENCH_TOY_START_S stands for a framework whose import is slow (TensorFlow's
        # takes seconds on a busy machine): only a worker makes the adapter.
        time.sleep(float(os.environ.get("FWBENCH_TOY_START_S", "0")))

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        # The BLAS pool's size is fixed at import; the worker's OMP_NUM_THREADS set it.
        return {"intra_op_threads": threads}

    def unavailable_reason(self, device: str) -> str | None:
        return None if device == "cpu" else "NumPy runs on the CPU only"

    def environment(self, device: str) -> dict[str, Any]:
        return {"numpy": np.__version__, "device_name": "cpu"}

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        from fwbench.catalog.models import get_model

        return get_model(model).build("numpy", dims)

    def count_params(self, model: Any) -> int:
        return int(sum(w.size for w in model))

    def build(self, case: Case) -> Workload:
        # The task's class from the registry entry, constructed as cls(weights, batch,
        # case): a plugin's task adds a class of that shape (fwbench_toy_task).
        cls = workload_class(self.name, case)
        weights = self.build_model(case.model, case.dims)
        # Its inputs from the model's signature alone, as every framework makes them.
        ((_, images),) = synthetic_arrays(case, case.model_spec)
        batch = images.reshape(case.batch_size, -1)
        built: Workload = cls(weights, batch, case)
        return built

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError)

    def reset_device_memory(self, device: str) -> None:
        pass

    def device_memory(self, device: str) -> dict[str, int] | None:
        return None


register_framework(
    FrameworkInfo(
        name="numpy",
        label="NumPy (toy)",
        modes=("eager",),
        devices=("cpu",),
        packages=("numpy",),
        adapter_path="fwbench_toy_framework:NumpyAdapter",
        distributions=("numpy",),
        precisions=("fp32",),
        colour="#4DABCF",
        # A plugin's task (fwbench_toy_task's probe) adds its own class when loaded.
        workloads=(("infer", "fwbench_toy_framework:Forward"),),
        task_reasons=(("train", "the toy runs forward passes only"),),
        counts_flops=NO(False, "the toy counts no FLOPs"),
        can_explain=NO(False, "the toy has no profiler"),
        can_measure_peak=NO(False, "the toy measures no peak"),
    )
)
