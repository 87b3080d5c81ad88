"""What the PyTorch sources share, imported in a worker only (it imports torch): a
module's trainable parameters, tensors' dtypes as fwbench names them, and the frameworks
that run a PyTorch model: PyTorch itself, and the inference runtimes through
torch.onnx's export, as for the zoo's models."""

from __future__ import annotations

from typing import Any

# How the runtimes get a PyTorch source's model: as they get the zoo's.
RUNS_TORCH = (
    ("torch", "natively, in every mode"),
    ("onnxruntime", "exported to ONNX by torch.onnx (as the zoo's models)"),
    ("openvino", "exported to ONNX by torch.onnx (as the zoo's models)"),
)
CANNOT_TORCH = (
    ("tensorflow", "a PyTorch model runs on PyTorch and the runtimes it exports to"),
    ("keras-jax", "a PyTorch model runs on PyTorch and the runtimes it exports to"),
    ("keras-torch", "a Keras 3 model runs there; this is a plain PyTorch module"),
)


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def trainable(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))


def check_module(found: Any, text: str) -> Any:
    import torch

    if not isinstance(found, torch.nn.Module):
        raise TypeError(f"{text} returned a {type(found).__name__}, not a torch.nn.Module")
    return found
