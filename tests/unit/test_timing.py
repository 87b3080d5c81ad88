"""The timing loop, driven by a fake clock: steps and syncs advance it by scripted costs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fwbench.launch.rounds import step_estimate, switch_blocks, warm_steps
from fwbench.measure.settings import TimingConfig
from fwbench.measure.timing import Prepared, RunTiming, Timing, is_settled, is_stable, measure


def timed(dev: FakeDevice, config: TimingConfig) -> Timing:
    """One run of `dev` under `config`, its blocks allowed the whole max_time_s."""
    run = config.run.model_copy(update={"run_time_s": config.plan.max_time_s})
    return measure(dev.step, dev.sync, run, config.plan.run_stop(run), dev.clock)


class FakeDevice:
    """A clock plus a step whose cost follows a script; sync costs `sync_cost`."""

    def __init__(self, step_costs: Iterator[float], sync_cost: float = 0.0) -> None:
        self.now = 0.0
        self.costs = step_costs
        self.sync_cost = sync_cost
        self.steps = 0
        self.syncs = 0

    def clock(self) -> float:
        return self.now

    def step(self) -> None:
        self.steps += 1
        self.now += next(self.costs)

    def sync(self) -> None:
        self.syncs += 1
        self.now += self.sync_cost


def costs(first: float, warm: list[float], steady: float) -> Iterator[float]:
    yield first
    yield from warm
    while True:
        yield steady


def test_first_step_is_reported_apart_from_the_steady_state() -> None:
    dev = FakeDevice(costs(2.0, [], 0.010))
    t = timed(dev, TimingConfig())
    assert t.first_step_s == pytest.approx(2.0)
    assert t.median_s == pytest.approx(0.010)
    assert t.ci_low_s == pytest.approx(0.010) and t.ci_high_s == pytest.approx(0.010)


def test_warmup_runs_until_step_times_are_stable() -> None:
    warm = [0.5, 0.3, 0.2, 0.15, 0.1]
    dev = FakeDevice(costs(1.0, warm, 0.1))
    t = timed(dev, TimingConfig(warmup_window=3))
    assert t.warmup_stop == "stable"
    # The slow steps are all in warmup, and stability needs two windows of 0.1 s steps.
    assert t.warmup_steps >= len(warm) + 1
    assert all(s == pytest.approx(0.1) for s in t.samples)


def test_warmup_ends_at_its_budget_when_never_stable() -> None:
    def drifting() -> Iterator[float]:
        c = 0.1
        while True:
            c *= 1.2
            yield c

    dev = FakeDevice(drifting())
    cfg = TimingConfig(max_warmup_s=2.0, max_time_s=1.0, min_samples=3, max_samples=5)
    t = timed(dev, cfg)
    assert t.warmup_stop == "budget"
    assert t.warmup_s >= 2.0


def noisy(level: float, spread: float, seed: int = 0) -> Iterator[float]:
    """Steps of a busy machine: no trend, each step off by up to +-spread (uniform)."""
    import random

    rng = random.Random(seed)
    while True:
        yield level * (1 + rng.uniform(-spread, spread))


def test_settled_warmup_ends_where_a_busier_machine_keeps_stable_one_going() -> None:
    """Steps that get slower (another job ramping up) are never stable, but they are
    past warming up; so is a machine's noise, where settled ends sooner on average."""

    def busier() -> Iterator[float]:
        cost = 0.02
        while True:
            cost *= 1.08
            yield cost

    cfg = dict(max_warmup_s=2.0, max_time_s=0.5, min_samples=3, max_samples=5)
    stopped = {}
    for rule in ("stable", "settled"):
        dev = FakeDevice(busier())
        t = timed(dev, TimingConfig(warmup_rule=rule, **cfg))
        stopped[rule] = (t.warmup_stop, t.warmup_steps)
    assert stopped["stable"][0] == "budget"
    assert stopped["settled"] == ("settled", 6)  # two windows of 3
    steps: dict[str, list[int]] = {"stable": [], "settled": []}
    for seed in range(20):
        for rule, found in steps.items():
            dev = FakeDevice(noisy(0.02, 0.4, seed))
            cfg_rule = TimingConfig(warmup_rule=rule, **cfg)
            found.append(timed(dev, cfg_rule).warmup_steps)
    assert sum(steps["settled"]) < sum(steps["stable"])


def test_settled_warmup_waits_out_a_transient_as_long_as_steps_get_faster() -> None:
    warm = [0.5, 0.4, 0.32, 0.26, 0.21, 0.17, 0.14, 0.12, 0.11]
    dev = FakeDevice(costs(1.0, warm, 0.1))
    t = timed(dev, TimingConfig(warmup_rule="settled"))
    assert t.warmup_stop == "settled" and t.warmup_steps >= len(warm)
    assert all(s == pytest.approx(0.1) for s in t.samples)


def test_is_settled() -> None:
    assert is_settled([1.0, 1.0, 1.0, 1.3, 0.9, 1.2], window=3, tolerance=0.05)  # noise
    assert is_settled([1.0, 1.0, 1.0, 1.2, 1.2, 1.2], window=3, tolerance=0.05)  # slower
    assert not is_settled([2.0, 2.0, 2.0, 1.0, 1.0, 1.0], window=3, tolerance=0.05)
    assert not is_settled([1.0, 1.0], window=3, tolerance=0.05)


def test_blocks_are_long_enough_to_hide_the_sync_overhead() -> None:
    # 50 us per sync, 100 us per step: a block must last >= 1000 x 50 us = 50 ms.
    dev = FakeDevice(costs(0.001, [], 100e-6), sync_cost=50e-6)
    t = timed(dev, TimingConfig())
    assert t.sync_overhead_s == pytest.approx(50e-6)
    assert t.steps_per_block * 100e-6 >= 0.05
    # The per-step sample includes the one sync, spread over the block: overhead < 0.1%.
    assert t.median_s == pytest.approx(100e-6, rel=1e-3)


def test_a_later_run_takes_the_block_size_its_case_found_and_still_warms_up() -> None:
    # This run alone would put about 500 steps in a block; the case's first run found 300.
    dev = FakeDevice(costs(0.001, [], 100e-6), sync_cost=50e-6)
    config = TimingConfig()
    run = config.run.model_copy(update={"run_time_s": config.plan.max_time_s})
    t = measure(dev.step, dev.sync, run, config.plan.run_stop(run), dev.clock, steps_per_block=300)
    assert t.steps_per_block == 300
    assert t.warmup_steps >= config.run.min_warmup_steps
    alone = timed(FakeDevice(costs(0.001, [], 100e-6), sync_cost=50e-6), config)
    assert alone.steps_per_block > 300


def test_precision_target_stops_a_quiet_measurement_early() -> None:
    dev = FakeDevice(costs(0.1, [], 0.02))
    t = timed(dev, TimingConfig(min_samples=10, max_time_s=100))
    assert t.stop_reason == "precision"
    assert len(t.samples) == 10
    assert t.warnings == ()


def test_noisy_measurement_stops_at_the_budget_and_warns() -> None:
    def noisy() -> Iterator[float]:
        yield 0.1
        i = 0
        while True:
            i += 1
            yield 0.01 if i % 2 else 0.02

    dev = FakeDevice(noisy())
    cfg = TimingConfig(min_samples=10, max_time_s=1.0, max_warmup_s=0.1, min_warmup_steps=1)
    t = timed(dev, cfg)
    assert t.stop_reason == "budget"
    assert t.measured_s >= 1.0
    # A run says what its blocks show; precision is judged over runs (test_runs.py).
    assert any("large spread" in w for w in t.warnings)


def test_max_samples_caps_the_measurement() -> None:
    def jitter() -> Iterator[float]:
        i = 0
        while True:
            i += 1
            yield 0.020 if i % 2 else 0.021

    dev = FakeDevice(jitter())
    cfg = TimingConfig(min_samples=5, max_samples=5, target_ci=1e-9, max_time_s=100)
    t = timed(dev, cfg)
    assert t.stop_reason == "max_samples"
    assert len(t.samples) == 5


def test_every_timed_block_ends_with_a_sync() -> None:
    dev = FakeDevice(costs(0.1, [], 0.02))
    t = timed(dev, TimingConfig(min_samples=10, max_time_s=100))
    timed_syncs = 1 + t.warmup_steps + len(t.samples)
    overhead_probes = 21
    assert dev.syncs == timed_syncs + overhead_probes


def test_is_stable() -> None:
    assert is_stable([1.0, 1.0, 1.0, 1.01, 1.0, 0.99], window=3, tolerance=0.05)
    assert not is_stable([2.0, 2.0, 2.0, 1.0, 1.0, 1.0], window=3, tolerance=0.05)
    assert not is_stable([1.0, 1.0], window=3, tolerance=0.05)


def _prepared(step_s: float, warmup_steps: int = 5) -> Prepared:
    return Prepared(
        first_step_s=step_s * 10,
        warmup_steps=warmup_steps,
        warmup_s=step_s * warmup_steps,
        warmup_stop="stable",
        sync_overhead_s=0.0,
        steps_per_block=1,
    )


def test_a_block_after_a_switch_starts_after_enough_untimed_steps() -> None:
    # Short steps need several untimed steps to fill the time their threads take to
    # reach speed again after another process ran; a long step is one (never zero).
    config = RunTiming()
    assert warm_steps(step_estimate(_prepared(0.0076)), config.min_switch_warm_s) == 4
    assert warm_steps(step_estimate(_prepared(0.2)), config.min_switch_warm_s) == 1
    assert warm_steps(step_estimate(_prepared(0.0076)), 0.0) == 1  # the design until 2026-11-25
    # Without a warmup step to go by, the first step is the estimate.
    assert warm_steps(step_estimate(_prepared(0.001, warmup_steps=0)), 0.03) == 3
    assert warm_steps(0.0, 0.03) == 1  # no step timed: one untimed step
    # And blocks between switches still last min_switch_block_s.
    assert switch_blocks(_prepared(0.0076), config.min_switch_block_s).steps_per_block == 7


class _SwitchingWorker:
    """A worker whose steps take `step_s` each; it answers a block with its timed steps'
    seconds, the untimed ones (`warm`) left out, as the real worker does."""

    def __init__(self, step_s: float) -> None:
        self.step_s = step_s
        self.sent: list[dict[str, int]] = []

    def send(self, message: dict[str, int]) -> None:
        self.sent.append(message)

    def receive(self) -> dict[str, object]:
        return {"event": "block", "seconds": self.sent[-1]["steps"] * self.step_s}


class _Tracker:
    def __init__(self) -> None:
        self.steps: list[int] = []

    def __call__(self, hook: str, *args: object) -> object:
        if hook == "after_block":
            self.steps.append(int(args[2]))  # type: ignore[call-overload]
        return None


def test_untimed_steps_after_a_switch_follow_the_measured_step() -> None:
    from fwbench.case import Case
    from fwbench.launch.protocol import GroupRequest
    from fwbench.launch.rounds import CaseRuns, _Runner

    case = Case.build(framework="torch", model="resnet18", task="infer", batch_size=1)
    state = CaseRuns(GroupRequest.for_case(case, TimingConfig()))
    tracker = _Tracker()
    state.tracking = {"energy": tracker}  # type: ignore[dict-item]
    worker = _SwitchingWorker(step_s=0.005)
    # Warmup's estimate was 10 ms a step (its early steps were slow): 3 untimed steps
    # fill the default 30 ms, and blocks of 5 steps its 50 ms.
    runner = _Runner(state, worker, _prepared(0.01), 0.0)  # type: ignore[arg-type]
    runner.alternate(RunTiming())
    assert (runner.warm, runner.prepared.steps_per_block) == (3, 5)
    runner.block()
    runner.block()
    # The first block measured 5 ms a step: the next block starts after 6 untimed steps
    # (30 ms), and is long enough for 50 ms.
    assert [m["warm"] for m in worker.sent] == [3, 6]
    assert worker.sent[1]["steps"] * 0.005 >= 0.05
    # A tracker's wall time holds the untimed steps, so they are counted with it.
    assert tracker.steps == [5 + 3, worker.sent[1]["steps"] + 6]


class IdleSyncDevice(FakeDevice):
    """A sync that costs `sync_cost` after steps and `idle_sync_cost` with nothing to wait
    for, as the overhead probe finds it."""

    def __init__(self, step_costs: Iterator[float], sync_cost: float, idle_sync_cost: float):
        super().__init__(step_costs, sync_cost)
        self.idle_sync_cost = idle_sync_cost
        self.stepped = False

    def step(self) -> None:
        super().step()
        self.stepped = True

    def sync(self) -> None:
        self.syncs += 1
        self.now += self.sync_cost if self.stepped else self.idle_sync_cost
        self.stepped = False


@pytest.mark.parametrize("idle_sync", [53e-6, 49e-6])
def test_a_step_far_shorter_than_its_sync_is_timed_in_blocks_that_hide_the_sync(
    idle_sync: float,
) -> None:
    """A 2 us step under a 50 us sync: the warmup's step less the probed sync is mostly
    the probe's noise (negative here at 53 us, a fraction of the step at 49 us), so the
    block size is found by timing blocks instead; each step reads 2 us, not the sync's
    50 (one step a block), nor a block of millions of steps."""
    dev = IdleSyncDevice(costs(0.001, [], 2e-6), sync_cost=50e-6, idle_sync_cost=idle_sync)
    t = timed(dev, TimingConfig())
    assert t.median_s == pytest.approx(2e-6, rel=0.01)
    assert t.steps_per_block * 2e-6 >= idle_sync / 1e-3
    assert t.steps_per_block * 2e-6 <= 4 * idle_sync / 1e-3
