"""What the PyTorch sources share: their registration (the frameworks that run a
PyTorch model: PyTorch itself, and the inference runtimes through torch.onnx's export,
as for the zoo's models), and, in a worker (torch imported where they compute), a
module's trainable parameters and tensors' dtypes as fwbench names them."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.sources import Source, register_source

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


def torch_source(**fields: Any) -> Source:
    """A source of PyTorch modules, registered: PyTorch reads what they declare and runs
    them; the runtimes run them through torch.onnx's export."""
    return register_source(Source(native="torch", runs=RUNS_TORCH, cannot=CANNOT_TORCH, **fields))


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def trainable(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))


def check_module(found: Any, text: str) -> Any:
    import torch

    if not isinstance(found, torch.nn.Module):
        raise TypeError(f"{text} returned a {type(found).__name__}, not a torch.nn.Module")
    return found
