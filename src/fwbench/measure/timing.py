"""Synchronised step timing: first step, warmup until stable, blocks until precise.

Two halves, so that several workers can be measured in alternation (METHODOLOGY rule
15): `prepare` runs inside a worker (first step, warmup, sync-overhead probe, block
size); `steady` runs wherever the blocks are driven from and decides when to stop; it
only sees block durations, so it never needs a clock. `measure` joins them for one
workload in one process. Every timed region ends with the workload's own device sync; a
block of k steps has one sync at its end, with k chosen so clock and sync overhead stay
under 0.1% of the block.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fwbench.measure import stats

Clock = Callable[[], float]
StopReason = Literal["precision", "budget", "max_samples", "failed"]
WarmupStop = Literal["stable", "settled", "max_steps", "budget"]


class RunTiming(BaseModel):
    """How each run (worker process) of a case is timed: its warmup and block size (the
    worker's `calibrate`), its blocks and when they stop (`RunStop`, with the case's
    precision target), blocks alternating with other runs', and what a run warns of.
    The worker is sent these and nothing else of the settings: how many runs a case
    gets is the driver's (fwbench.measure.runs.RunPlan), how verdicts read the runs the
    views' and the stopping rule's (fwbench.measure.verdicts.Reading). Not part of a
    case's identity."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_warmup_steps: int = Field(3, ge=0)
    max_warmup_steps: int = Field(100, ge=0)
    max_warmup_s: float = Field(10.0, ge=0)
    # Warmup ends when the median of the last `warmup_window` steps is compared with the
    # median of the window before it: "stable" when they agree within
    # `warmup_tolerance`; "settled" when the last is no longer faster by more than that
    # (a machine's noise can keep two windows 5% apart for ever, but it does not make
    # each window faster than the one before: docs/methodology.md).
    warmup_window: int = Field(3, ge=1)
    warmup_tolerance: float = Field(0.05, gt=0)
    warmup_rule: Literal["stable", "settled"] = "stable"
    # Blocks per run: at least min_samples (6 is the fewest with a 95% interval of the
    # median), at most max_samples.
    min_samples: int = Field(6, ge=1)
    max_samples: int = Field(1000, ge=1)
    # A run stops when its own CI is within the case's target, or after run_time_s of
    # blocks (never more than the case's whole budget: RunPlan.max_time_s).
    run_time_s: float = Field(2.0, gt=0, allow_inf_nan=False)
    # Never stop before this much steady-state time (energy counters need a window).
    min_time_s: float = Field(0.0, ge=0)
    # Shortest block, whatever the sync overhead; blocks are also >= 1000x the overhead.
    min_block_s: float = Field(1e-3, ge=0)
    # Shortest block when blocks alternate between processes: the switch (a cold cache,
    # the other pool's threads going to sleep) must cost nothing measurable against it.
    min_switch_block_s: float = Field(0.05, ge=0)
    # Untimed work before each block after a switch: at least one step, and as many as
    # fill this long. One step was not enough for short steps: after it, a TensorFlow
    # step of 7.6 ms stayed 12% slower than without a switch; after 30 ms, within 2%
    # (benchmarks/switch_cost.py; docs/methodology.md, "Blocks after a switch").
    min_switch_warm_s: float = Field(0.03, ge=0)
    max_overhead_share: float = Field(1e-3, gt=0)
    spread_warning: float = Field(0.10, gt=0)
    # A run whose second half of blocks is this much faster or slower than its first
    # (and more than its own noise) was still warming up, or the machine changed.
    drift_warning: float = Field(0.02, gt=0)
    # Runs after a case's first load what it compiled (JIT programs, generated kernels)
    # from a cache that lives as long as the command, instead of compiling it again: the
    # first run's first step still shows the cold compile (docs/methodology.md).
    compile_cache: bool = True

    @model_validator(mode="after")
    def _ordered(self) -> RunTiming:
        if self.max_samples < self.min_samples:
            raise ValueError(
                f"max_samples ({self.max_samples}) is below min_samples ({self.min_samples})"
            )
        return self

    def stop(self, target_ci: float, max_time_s: float) -> RunStop:
        """When one run's blocks stop, with the case's precision target and what is left
        of its budget (at most run_time_s)."""
        return RunStop(
            min_samples=self.min_samples,
            max_samples=self.max_samples,
            min_time_s=self.min_time_s,
            target_ci=target_ci,
            max_time_s=min(self.run_time_s, max_time_s),
        )


class RunStop(BaseModel):
    """When one run's blocks stop: never before min_samples blocks and min_time_s of
    them; then once the 95% interval of their median is within +-target_ci, or
    max_time_s of blocks have passed; at max_samples whatever they show."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_samples: int = Field(ge=1)
    max_samples: int = Field(ge=1)
    min_time_s: float = Field(ge=0)
    target_ci: float = Field(gt=0)
    max_time_s: float = Field(gt=0, allow_inf_nan=False)


@dataclass(frozen=True)
class Prepared:
    """What happened before the steady state, and the block size chosen for it."""

    first_step_s: float
    warmup_steps: int
    warmup_s: float
    warmup_stop: WarmupStop
    sync_overhead_s: float
    steps_per_block: int


@dataclass(frozen=True)
class Timing(Prepared):
    """The prepared phase plus the steady state's samples and statistics."""

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


def is_settled(times: list[float], window: int, tolerance: float) -> bool:
    """The last window of steps is no faster than the one before it, beyond `tolerance`:
    whatever warming up still does (caches, allocators, JIT), it no longer pays."""
    if len(times) < 2 * window:
        return False
    recent = stats.median(times[-window:])
    before = stats.median(times[-2 * window : -window])
    return recent >= (1 - tolerance) * before


def run_block(
    step: Callable[[], object], sync: Callable[[], None], steps: int, clock: Clock
) -> float:
    """Seconds for `steps` steps closed by one sync."""
    start = clock()
    for _ in range(steps):
        step()
    sync()
    return clock() - start


def sync_overhead(sync: Callable[[], None], clock: Clock, repeats: int = 21) -> float:
    costs = []
    for _ in range(repeats):
        start = clock()
        sync()
        costs.append(clock() - start)
    return stats.median(costs)


def prepare(
    step: Callable[[], object],
    sync: Callable[[], None],
    config: RunTiming,
    clock: Clock = time.perf_counter,
    steps_per_block: int | None = None,
) -> Prepared:
    """First step, warmup until stable, then the block size for the steady state."""
    return calibrate(
        lambda n: run_block(step, sync, n, clock),
        lambda: sync_overhead(sync, clock),
        config,
        steps_per_block,
    )


def calibrate(
    blocks: Callable[[int], float],
    sync_overhead: Callable[[], float],
    config: RunTiming,
    steps_per_block: int | None = None,
) -> Prepared:
    """`prepare` over any runner of n synced steps: a local workload, or the ranks of a
    distributed case driven in lockstep by their launcher (every rank must take the same
    number of steps, so the warmup decisions are made in one place).

    `steps_per_block` is the block size the case's first run found, which the driver
    hands its later runs: every run's blocks then average as many steps (a block of more
    steps spreads less, so a p25 or min would read blocks of other sizes differently
    from run to run). Each run still warms up: a fresh process is cold."""
    first = blocks(1)
    warm: list[float] = []
    warmup_stop: WarmupStop = "max_steps"
    over = is_settled if config.warmup_rule == "settled" else is_stable
    while len(warm) < config.max_warmup_steps:
        warm.append(blocks(1))
        if len(warm) >= config.min_warmup_steps and over(
            warm, config.warmup_window, config.warmup_tolerance
        ):
            warmup_stop = config.warmup_rule
            break
        if sum(warm) >= config.max_warmup_s and len(warm) >= config.min_warmup_steps:
            warmup_stop = "budget"
            break
    overhead = sync_overhead()
    # Warmup steps were timed with a sync each: take the sync out of the step estimate.
    timed = stats.median(warm[-config.warmup_window :]) if warm else first
    estimate = timed - overhead
    min_block = max(config.min_block_s, overhead / config.max_overhead_share)
    if steps_per_block:
        per_block = steps_per_block
    elif estimate > 0.5 * timed:
        per_block = max(1, math.ceil(min_block / estimate))
    else:
        # The sync is most of a timed step, so the difference is mostly the probe's
        # noise (it can even be negative): block sizes are tried instead.
        per_block = _grown(blocks, min_block)
    return Prepared(
        first_step_s=first,
        warmup_steps=len(warm),
        warmup_s=sum(warm),
        warmup_stop=warmup_stop,
        sync_overhead_s=overhead,
        steps_per_block=per_block,
    )


# The most steps a block tried by `_grown` holds: a step too short to time at all.
MAX_STEPS_PER_BLOCK = 1 << 24


def _grown(blocks: Callable[[int], float], min_block: float) -> int:
    """The first block size, doubling from 2, whose timed block lasts `min_block`."""
    per_block = 2
    while blocks(per_block) < min_block and per_block < MAX_STEPS_PER_BLOCK:
        per_block *= 2
    return per_block


@dataclass
class Steady:
    """The steady-state samples of one runner, and why its measurement ended."""

    samples: list[float] = field(default_factory=list)  # seconds per step
    elapsed_s: float = 0.0
    stop_reason: StopReason = "max_samples"
    error: BaseException | None = None

    def state(self, config: RunStop) -> StopReason | None:
        """The reason this runner could stop now, or None if it needs more samples."""
        if self.error is not None:
            return "failed"
        if len(self.samples) >= config.max_samples:
            return "max_samples"
        if len(self.samples) < config.min_samples or self.elapsed_s < config.min_time_s:
            return None
        low, high = stats.median_ci(self.samples)
        if stats.relative_half_width(low, high, stats.median(self.samples)) <= config.target_ci:
            return "precision"
        if self.elapsed_s >= config.max_time_s:
            return "budget"
        return None


def steady(
    blocks: Sequence[Callable[[], float | tuple[float, int]]],
    steps_per_block: Sequence[int],
    config: RunStop,
) -> list[Steady]:
    """Run one block of each runner in turn until every runner may stop.

    Runners keep alternating until all are done, so that drift of a noisy machine hits
    each of them alike; a runner whose block raises is dropped with its error. A block
    returns its seconds, or (seconds, steps) when its length changed on the way.
    """
    runs = [Steady() for _ in blocks]
    while True:
        for block, per_block, run in zip(blocks, steps_per_block, runs, strict=True):
            if run.error is not None:
                continue
            try:
                found = block()
            except Exception as exc:
                run.error = exc
                run.stop_reason = "failed"
                continue
            seconds, steps = found if isinstance(found, tuple) else (found, per_block)
            run.elapsed_s += seconds
            run.samples.append(seconds / steps)
        states = [run.state(config) for run in runs]
        if all(s is not None for s in states) or "max_samples" in states:
            for run, reason in zip(runs, states, strict=True):
                run.stop_reason = reason or "max_samples"
            return runs


def finish(prepared: Prepared, run: Steady, config: RunTiming) -> Timing:
    """The timing record of one runner: median, its 95% CI, and warnings."""
    if not run.samples:
        raise ValueError("no steady-state samples to summarise")
    med = stats.median(run.samples)
    low, high = stats.median_ci(run.samples)
    return Timing(
        **dataclasses.asdict(prepared),
        samples=tuple(run.samples),
        stop_reason=run.stop_reason,
        median_s=med,
        ci_low_s=low,
        ci_high_s=high,
        warnings=tuple(_warnings(run.samples, med, low, high, run.stop_reason, config)),
    )


def measure(
    step: Callable[[], object],
    sync: Callable[[], None],
    config: RunTiming,
    stop: RunStop,
    clock: Clock = time.perf_counter,
    steps_per_block: int | None = None,
) -> Timing:
    """Time `step` (which must leave work for `sync` to wait on) under `config`, its
    blocks until `stop` (of `steps_per_block` steps, where a first run chose them)."""
    prepared = prepare(step, sync, config, clock, steps_per_block)
    k = prepared.steps_per_block
    (run,) = steady([lambda: run_block(step, sync, k, clock)], [k], stop)
    if run.error is not None:
        raise run.error
    return finish(prepared, run, config)


def _warnings(
    samples: list[float],
    med: float,
    low: float,
    high: float,
    stop_reason: StopReason,
    config: RunTiming,
) -> list[str]:
    """What one run's blocks say about themselves: spread, and a trend left in them.
    (Whether the case is precise enough is decided over its runs: fwbench.measure.runs.)"""
    out = []
    spread = stats.iqr(samples) / med if med > 0 else 0.0
    if spread > config.spread_warning:
        out.append(
            f"large spread: IQR is {spread:.0%} of the median "
            f"(over {config.spread_warning:.0%}); the machine may be noisy"
        )
    drift = drift_of(samples)
    noise = stats.relative_half_width(low, high, med)
    if drift is not None and abs(drift) > max(config.drift_warning, 2 * noise):
        way = "slower" if drift > 0 else "faster"
        out.append(
            f"not steady: the second half of the blocks ran {abs(drift):.1%} {way} than the "
            "first (warmup not over, or the machine changed during the run)"
        )
    return out


def drift_of(samples: Sequence[float]) -> float | None:
    """Median of the second half of the blocks relative to the first, minus 1 (None with
    fewer than 8 blocks: too few to tell a trend from noise)."""
    if len(samples) < 8:
        return None
    half = len(samples) // 2
    first, second = stats.median(samples[:half]), stats.median(samples[-half:])
    return second / first - 1 if first > 0 else None
