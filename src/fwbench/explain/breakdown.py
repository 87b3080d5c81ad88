"""A profiled step, broken down by category (and by phase where the workload marks its
phases: a generation's prefill and decoding steps): built in the worker, stored with the
case."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from fwbench.explain.categories import Categoriser
from fwbench.explain.timeline import Attribution, Event, Window, attribute, attribute_ranges

TOP_OPS = 15


class TopOp(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    category: str
    seconds_per_step: float


class Phase(BaseModel):
    """One phase of the profiled steps (a generation's prefill, or its decoding steps),
    per occurrence: the prefill per generation, the decoding phase per decoding step (so
    per output token, as the time per output token is)."""

    model_config = ConfigDict(frozen=True)

    occurrences: int  # its ranges in the profile: steps x (1 prefill, new_tokens - 1 decodes)
    profiled_s: float  # its ranges' time / occurrences, with the profiler on
    categories: dict[str, float]  # seconds per occurrence, idle included; sum to profiled_s
    top_ops: list[TopOp]  # seconds_per_step here is per occurrence


class Breakdown(BaseModel):
    model_config = ConfigDict(frozen=True)

    profiler: str
    steps: int
    profiled_step_s: float  # window / steps, with the profiler on
    unprofiled_step_s: float | None = None  # the case's median without it
    categories: dict[str, float]  # seconds per step, idle included; sums to profiled_step_s
    top_ops: list[TopOp]
    trace: str | None = None  # a file for chrome://tracing / Perfetto, or a TensorBoard logdir
    # By phase ("prefill", "decode"), for workloads that mark theirs (task generate); their
    # time adds up to the window less the loop between them. {} before phases were kept.
    phases: dict[str, Phase] = {}

    @property
    def overhead(self) -> float | None:
        """How much slower the profiled steps were than the unprofiled median."""
        if not self.unprofiled_step_s:
            return None
        return self.profiled_step_s / self.unprofiled_step_s - 1


def _per(found: Attribution, count: int) -> tuple[dict[str, float], list[TopOp]]:
    """Categories, largest first, and top ops, each divided by `count` (steps, or a
    phase's occurrences)."""
    per = {cat: sec / count for cat, sec in found.by_category.items()}
    ops = sorted(found.by_op.items(), key=lambda kv: -kv[1])[:TOP_OPS]
    return (
        dict(sorted(per.items(), key=lambda kv: -kv[1])),
        [TopOp(name=n, category=c, seconds_per_step=s / count) for (n, c), s in ops],
    )


def build(
    profiler: str,
    events: list[Event],
    window: Window | tuple[float, float],
    steps: int,
    categorise: Categoriser,
    trace: str | None,
) -> Breakdown:
    window = Window.of(window)
    found = attribute(events, window.span, categorise)
    categories, top_ops = _per(found, steps)
    phases = {}
    for name, ranges in window.phases.items():
        if not ranges:
            continue
        in_phase = attribute_ranges(events, ranges, categorise)
        phase_categories, phase_ops = _per(in_phase, len(ranges))
        phases[name] = Phase(
            occurrences=len(ranges),
            profiled_s=in_phase.window_s / len(ranges),
            categories=phase_categories,
            top_ops=phase_ops,
        )
    return Breakdown(
        profiler=profiler,
        steps=steps,
        profiled_step_s=found.window_s / steps,
        categories=categories,
        top_ops=top_ops,
        trace=trace,
        phases=phases,
    )
