"""What the PyTorch sources share in a worker (torch imported where they compute): a
module's trainable parameters, tensors' dtypes as fwbench names them, a check that a
function returned a module."""

from __future__ import annotations

from typing import Any


def dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def trainable(module: Any) -> int:
    return int(sum(p.numel() for p in module.parameters() if p.requires_grad))


def check_module(found: Any, text: str) -> Any:
    import torch

    if not isinstance(found, torch.nn.Module):
        raise TypeError(f"{text} returned a {type(found).__name__}, not a torch.nn.Module")
    return found
