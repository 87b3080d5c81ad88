"""Synchronised step timing: first step, warmup until stable, blocks until precise.

The clock is injected so the logic is tested with a fake one. Every timed region is
closed by the workload's own device sync (METHODOLOGY rules 1-5): a block of k steps has
one sync at its end, and k is chosen so the clock and sync overhead stay under 0.1% of
the block.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from fwbench.measure import stats

Clock = Callable[[], float]
StopReason = Literal["precision", "budget", "max_samples"]
WarmupStop = Literal["stable", "max_steps", "budget"]


class TimingConfig(BaseModel):
    """How long and how precisely to measure. Not part of a case's identity."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_warmup_steps: int = Field(3, ge=0)
    max_warmup_steps: int = Field(100, ge=0)
    max_warmup_s: float = Field(10.0, ge=0)
    # Warmup ends when the median of the last `warmup_window` steps agrees with the
    # median of the window before it within `warmup_tolerance`.
    warmup_window: int = Field(3, ge=1)
    warmup_tolerance: float = Field(0.05, gt=0)
    min_samples: int = Field(10, ge=1)
    max_samples: int = Field(1000, ge=1)
    # Stop when the 95% CI of the median is within +-target of it...
    target_ci: float = Field(0.01, gt=0)
    # ...or when steady-state measuring has taken this long (once min_samples are in).
    max_time_s: float = Field(10.0, gt=0)
    # Shortest block, whatever the sync overhead; blocks are also >= 1000x the overhead.
    min_block_s: float = Field(1e-3, ge=0)
    max_overhead_share: float = Field(1e-3, gt=0)
    spread_warning: float = Field(0.10, gt=0)


@dataclass(frozen=True)
class Timing:
    first_step_s: float
    warmup_steps: int
    warmup_s: float
    warmup_stop: WarmupStop
    sync_overhead_s: float
    steps_per_block: int
    samples: tuple[float, ...]  # seconds per step, one value per block
    stop_reason: StopReason
    median_s: float
    ci_low_s: float
    ci_high_s: float
    warnings: tuple[str, ...]

    @property
    def measured_s(self) -> float:
        return sum(self.samples) * self.steps_per_block


def is_stable(times: list[float], window: int, tolerance: float) -> bool:
    if len(times) < 2 * window:
        return False
    recent = stats.median(times[-window:])
    before = stats.median(times[-2 * window : -window])
    return abs(recent - before) <= tolerance * before


def _timed(step: Callable[[], object], sync: Callable[[], None], clock: Clock) -> float:
    start = clock()
    step()
    sync()
    return clock() - start


def _sync_overhead(sync: Callable[[], None], clock: Clock, repeats: int = 21) -> float:
    costs = []
    for _ in range(repeats):
        start = clock()
        sync()
        costs.append(clock() - start)
    return stats.median(costs)


def measure(
    step: Callable[[], object],
    sync: Callable[[], None],
    config: TimingConfig,
    clock: Clock = time.perf_counter,
) -> Timing:
    """Time `step` (which must leave work for `sync` to wait on) under `config`."""
    first = _timed(step, sync, clock)

    warm: list[float] = []
    warmup_stop: WarmupStop = "max_steps"
    while len(warm) < config.max_warmup_steps:
        warm.append(_timed(step, sync, clock))
        if len(warm) >= config.min_warmup_steps and is_stable(
            warm, config.warmup_window, config.warmup_tolerance
        ):
            warmup_stop = "stable"
            break
        if sum(warm) >= config.max_warmup_s and len(warm) >= config.min_warmup_steps:
            warmup_stop = "budget"
            break

    overhead = _sync_overhead(sync, clock)
    # Warmup steps were timed with a sync each: take the sync out of the step estimate.
    estimate = (stats.median(warm[-config.warmup_window :]) if warm else first) - overhead
    min_block = max(config.min_block_s, overhead / config.max_overhead_share)
    per_block = max(1, math.ceil(min_block / estimate)) if estimate > 0 else 1

    samples: list[float] = []
    elapsed = 0.0
    stop_reason: StopReason = "max_samples"
    while len(samples) < config.max_samples:
        start = clock()
        for _ in range(per_block):
            step()
        sync()
        block = clock() - start
        elapsed += block
        samples.append(block / per_block)
        if len(samples) < config.min_samples:
            continue
        low, high = stats.median_ci(samples)
        if stats.relative_half_width(low, high, stats.median(samples)) <= config.target_ci:
            stop_reason = "precision"
            break
        if elapsed >= config.max_time_s:
            stop_reason = "budget"
            break

    med = stats.median(samples)
    low, high = stats.median_ci(samples)
    return Timing(
        first_step_s=first,
        warmup_steps=len(warm),
        warmup_s=sum(warm),
        warmup_stop=warmup_stop,
        sync_overhead_s=overhead,
        steps_per_block=per_block,
        samples=tuple(samples),
        stop_reason=stop_reason,
        median_s=med,
        ci_low_s=low,
        ci_high_s=high,
        warnings=tuple(_warnings(samples, med, low, high, stop_reason, config)),
    )


def _warnings(
    samples: list[float],
    med: float,
    low: float,
    high: float,
    stop_reason: StopReason,
    config: TimingConfig,
) -> list[str]:
    out = []
    spread = stats.iqr(samples) / med if med > 0 else 0.0
    if spread > config.spread_warning:
        out.append(
            f"large spread: IQR is {spread:.0%} of the median "
            f"(over {config.spread_warning:.0%}); the machine may be noisy"
        )
    half = stats.relative_half_width(low, high, med)
    if stop_reason != "precision" and half > config.target_ci:
        out.append(
            f"precision target not reached: 95% CI is +-{half:.1%} of the median, "
            f"target +-{config.target_ci:.1%} ({stop_reason} ended the measurement)"
        )
    return out
