"""A profiled step, broken down by category: built in the worker, stored with the case."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fwbench.explain.categories import Categoriser
from fwbench.explain.timeline import Event, attribute

TOP_OPS = 15


class TopOp(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    category: str
    seconds_per_step: float


class Breakdown(BaseModel):
    model_config = ConfigDict(frozen=True)

    profiler: str
    steps: int
    profiled_step_s: float  # window / steps, with the profiler on
    unprofiled_step_s: float | None = None  # the case's median without it
    categories: dict[str, float]  # seconds per step, idle included; sums to profiled_step_s
    top_ops: list[TopOp]
    trace: str | None = None  # a file for chrome://tracing / Perfetto, or a TensorBoard logdir

    @property
    def overhead(self) -> float | None:
        """How much slower the profiled steps were than the unprofiled median."""
        if not self.unprofiled_step_s:
            return None
        return self.profiled_step_s / self.unprofiled_step_s - 1


def build(
    profiler: str,
    events: list[Event],
    window: tuple[float, float],
    steps: int,
    categorise: Categoriser,
    trace: str | None,
) -> Breakdown:
    found = attribute(events, window, categorise)
    per_step = {cat: sec / steps for cat, sec in found.by_category.items()}
    ops = sorted(found.by_op.items(), key=lambda kv: -kv[1])[:TOP_OPS]
    return Breakdown(
        profiler=profiler,
        steps=steps,
        profiled_step_s=found.window_s / steps,
        categories=dict(sorted(per_step.items(), key=lambda kv: -kv[1])),
        top_ops=[TopOp(name=n, category=c, seconds_per_step=s / steps) for (n, c), s in ops],
        trace=trace,
    )
