"""torch.profiler's events read into fwbench's (`read_events`), with the CPU op that
launched each GPU kernel (duck-typed, so this module imports no framework and tests run
it on plain objects).

A kernel's name says how it computes (cuDNN runs a convolution as an implicit GEMM); the
op that launched it says what it computes. `fwbench explain` categorises GPU kernels by
both.
"""

from __future__ import annotations

from typing import Any

from fwbench.explain.timeline import PHASES, WINDOW, Event, Window


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


def read_events(all_events: list[Any], on_gpu: bool) -> tuple[list[Event], Window]:
    """torch.profiler's events (`prof.events()`) as fwbench's: the ops (on the CPU) or the
    kernels (on a GPU), each with its ancestors and, for a kernel, the op that launched
    it; the window's span and a generation's phases, from their CPU ranges."""
    events: list[Event] = []
    span = (0.0, 0.0)
    phases: dict[str, list[tuple[float, float]]] = {}
    launched_by = kernel_launchers(all_events) if on_gpu else {}
    for ev in all_events:
        start, end = ev.time_range.start * 1e-6, ev.time_range.end * 1e-6
        is_gpu = ev.device_type.name == "CUDA"
        if is_gpu and getattr(ev, "is_user_annotation", False):
            # On GPUs every range (the window, a phase, Optimizer.step, DDP's forward)
            # shows twice, on the CPU and as a GPU annotation from its first kernel to
            # its last: the CPU's is read, as torch's own totals leave the copy out. Kept,
            # the copy made the window end at the last kernel, before the sync, and took
            # the gaps between its kernels from idle.
            continue
        if ev.name == WINDOW:
            span = (start, end)
            continue
        if ev.name in PHASES:
            phases.setdefault(PHASES[ev.name], []).append((start, end))
            continue
        if is_gpu != on_gpu:  # GPU cases: the kernels' timeline; CPU cases: the ops'
            continue
        # A kernel's name says how it computes (cuDNN runs convolutions as implicit
        # GEMMs), the op that launched it says what: categories read both.
        parent = launched_by.get(id(ev)) if is_gpu else ev.cpu_parent
        ancestors = []
        while parent is not None and parent.name != WINDOW:
            # A phase says when an op ran, not what it does ("prefill" reads "fill").
            if parent.name not in PHASES:
                ancestors.append(parent.name)
            parent = parent.cpu_parent
        text = "|".join([*reversed(ancestors), ev.name])
        thread = f"gpu:{ev.device_index}" if is_gpu else f"cpu:{ev.thread}"
        events.append(Event(thread, start, end, ev.name, text))
    return events, Window(*span, phases)
