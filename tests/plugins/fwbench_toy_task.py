"""A toy task added in one module, as docs/adding-a-task.md describes.

`probe` runs the first layer of a model only: a step that is neither training nor
inference, so a framework that has not declared it must refuse it rather than measure
it as one of those. Its own dimension, `depth`, is how many times a step applies the
layer: declared here once, it is a --task-dims NAME=VALUE, a sweep axis and a stored
column without other edits. Its steps for PyTorch (a built-in framework) and for the toy
framework (fwbench_toy_framework) are classes here, registered on those frameworks'
entries: neither adapter is edited, and every other framework refuses the task with its
entry's reason. Loaded through FWBENCH_PLUGINS by tests/frameworks/test_plugin_task.py.
Imported in the CLI's process too, so PyTorch is imported inside the step's class only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fwbench.case import Case
from fwbench.catalog.frameworks import register_workload
from fwbench.frameworks.base import Workload
from fwbench.tasks import Dimension, Task, register_task

PROBE = register_task(
    Task(
        name="probe",
        label="probing",
        description="the model's first layer only (a toy task for tests)",
        dimensions=(
            Dimension("depth", "times a step applies the layer", default=1, maximum=64, short="d"),
        ),
    )
)


class NumpyProbe(Workload):
    """The toy framework's probe: its adapter constructs cls(weights, batch, case)."""

    def __init__(self, weights: list[np.ndarray], batch: np.ndarray, case: Case) -> None:
        self.weights, self.batch = weights, batch
        self.param_count = sum(w.size for w in weights)
        self.depth = case.task_values["depth"]

    def step(self) -> None:
        w1, b1, _, _ = self.weights
        hidden = np.maximum(self.batch @ w1 + b1, 0.0)
        for _ in range(self.depth - 1):
            hidden = np.maximum(self.batch @ w1 + b1 + hidden.mean(), 0.0)
        self.out = hidden

    def sync(self) -> None:
        pass

    def settings(self) -> dict[str, Any]:
        return {"precision": "fp32", "layout": "channels_first"}


class TorchProbe(Workload):
    """PyTorch's probe: the torch adapter constructs cls(model, case, spec, device). The
    model's first layers up to its first activation, `depth` times, without gradients."""

    def __init__(self, model: Any, case: Case, spec: Any, device: Any) -> None:
        import torch

        self.torch = torch
        layers = list(model.children())
        first = next(i for i, m in enumerate(layers) if isinstance(m, torch.nn.ReLU))
        self.head = torch.nn.Sequential(*layers[: first + 1]).to(device).eval()
        self.param_count = sum(p.numel() for p in model.parameters() if p.requires_grad)
        side = int(case.dims.get("input_size", 8))
        self.x = torch.randn(case.batch_size, 3, side, side, device=device)
        self.depth = case.task_values["depth"]
        self.settings_: dict[str, Any] = {"precision": "fp32", "layout": "channels_first"}

    def step(self) -> None:
        with self.torch.inference_mode():
            for _ in range(self.depth):
                self.out = self.head(self.x)

    def sync(self) -> None:
        pass  # CPU only in the tests

    def settings(self) -> dict[str, Any]:
        return self.settings_


register_workload("numpy", PROBE.name, "fwbench_toy_task:NumpyProbe")
register_workload("torch", PROBE.name, "fwbench_toy_task:TorchProbe")
