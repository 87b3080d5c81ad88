"""Which CPU op launched each GPU kernel, from torch.profiler's events (duck-typed, so
this module imports no framework and tests run it on plain objects).

A kernel's name says how it computes (cuDNN runs a convolution as an implicit GEMM); the
op that launched it says what it computes. `fwbench explain` categorises GPU kernels by
both.
"""

from __future__ import annotations

from typing import Any


def kernel_launchers(events: list[Any]) -> dict[int, Any]:
    """The CPU op that launched each GPU kernel (keyed by the kernel event's id()).

    The profiler links a kernel to its op by correlation id; where that link is not kept
    on the event (older PyTorch), the op's own list of (kernel name, duration) is matched.
    """
    ops = [ev for ev in events if ev.device_type.name == "CPU"]
    by_id = {ev.id: ev for ev in ops}
    by_kernel: dict[tuple[str, float], list[Any]] = {}
    for op in ops:
        for kernel in op.kernels:
            by_kernel.setdefault((kernel.name, round(kernel.duration, 3)), []).append(op)
    found: dict[int, Any] = {}
    for ev in events:
        if ev.device_type.name != "CUDA":
            continue
        op = by_id.get(getattr(ev, "linked_correlation_id", 0) or -1)
        if op is None:
            candidates = by_kernel.get((ev.name, round(ev.time_range.elapsed_us(), 3)))
            op = candidates.pop(0) if candidates else None
        if op is not None:
            found[id(ev)] = op
    return found
