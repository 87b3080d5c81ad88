"""Trackers: what is measured beside step time, around each run's steady state.

A tracker is one class plus one `register_tracker` call, and runs on one side:

- a **worker** tracker lives in a run's worker process (in every rank of a data-parallel
  case): `baseline()` after the framework import and before the build, `start()` when the
  steady state begins (after warmup), `block(seconds, steps)` after each timed block,
  `stop(workload)` after the last one, returning its result (JSON-able) for the run's
  report. The first run's result is the case's.
- a **driver** tracker lives in the measurement driver for one case across all its runs
  (fwbench.launch.local): `start()` / `stop()` around each run's steady state,
  `before_block()` / `after_block(...)` around each of the case's timed blocks,
  `end_run(kept)` once the run's report says whether it counts, and `result()` over
  every run. `min_window_s` makes a run's steady state last at least that long (energy
  counters need a window).

A tracker that raises loses its own figure, never the run: the loops hold trackers
through `Guarded`, which stops one at its first exception and says so in the result's
warnings.

Each registration names the record field its result fills: a field `Result` declares
(`memory`, `energy`, `work`), merged with what other trackers put there and validated
by that field's model, or, for a tracker the record does not know, `Result.tracked`
under the tracker's name, validated by the tracker's own `model`. Trackers are
framework-free: what they need of a framework they ask its adapter.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from fwbench.errors import SpecError, one_line
from fwbench.measure import energy
from fwbench.measure.memory import HostMemoryTracker
from fwbench.measure.nvml import NvmlMemorySampler

if TYPE_CHECKING:
    from fwbench.case import Case
    from fwbench.frameworks.base import Adapter, Workload


class CaseRequest(Protocol):
    """What a worker tracker is told of its run (the driver's request, as the worker
    received it: fwbench.launch.protocol.CaseRequest)."""

    @property
    def case(self) -> Case: ...

    @property
    def count_flops(self) -> bool:
        """Whether this run counts FLOPs (a case's first run)."""
        ...


class WorkerTracker:
    """Runs inside a run's worker process (see the module's docstring)."""

    def __init__(self, adapter: Adapter, request: CaseRequest) -> None:
        self.adapter = adapter
        self.request = request

    @classmethod
    def wanted(cls, request: CaseRequest) -> bool:
        """Whether this request asks for it (e.g. FLOPs only in a case's first run)."""
        return True

    def baseline(self) -> None:
        """After the framework import, before the model is built."""

    def start(self) -> None:
        """The steady state begins: what build and warmup did is forgotten."""

    def block(self, seconds: float, steps: int) -> None:
        """After each timed block; must cost nothing the next block would feel."""

    def stop(self, workload: Workload) -> Any:
        """After the timed blocks: the result, or None for nothing to record."""
        return None


class DriverTracker:
    """Runs in the driver for one case across its runs (see the module's docstring)."""

    min_window_s: float = 0.0

    def __init__(self, case: Case) -> None:
        self.case = case

    def start(self) -> None:
        """A run's steady state begins."""

    def before_block(self) -> Any:
        """Just before one of the case's timed blocks; the value goes to after_block."""
        return None

    def after_block(self, token: Any, wall_s: float, steps: int) -> None:
        """Just after that block: `wall_s` seconds for `steps` steps, seen from here (the
        untimed steps that start a block after a switch are among them)."""

    def stop(self) -> None:
        """The run's steady state is over."""

    def end_run(self, kept: bool) -> None:
        """The run ended: kept (its report was ok and its timing is the case's) or not."""

    def result(self) -> Any:
        """Over all the case's runs: the result, or None for nothing to record."""
        return None


@dataclass(frozen=True)
class TrackerInfo:
    name: str
    side: Literal["worker", "driver"]
    make: Callable[..., WorkerTracker | DriverTracker]
    # The Result field the result fills; None: Result.tracked[name].
    field: str | None = None
    # Validates Result.tracked[name] (trackers without a field of the record).
    model: type[BaseModel] | None = None
    # Only adds to a field another tracker filled (a device peak beside the host's).
    extends: bool = False


_TRACKERS: dict[str, TrackerInfo] = {}


def register_tracker(info: TrackerInfo) -> None:
    """Add a tracker: built-ins below, plugins from their module (fwbench.plugins)."""
    if info.name in _TRACKERS:
        raise SpecError(f"tracker {info.name!r} is already registered")
    if info.field is None and info.model is None:
        raise SpecError(f"tracker {info.name!r}: give the record field it fills or its model")
    _TRACKERS[info.name] = info


def trackers(side: Literal["worker", "driver"]) -> list[TrackerInfo]:
    from fwbench import plugins

    plugins.load()
    return [t for t in _TRACKERS.values() if t.side == side]


def tracker(name: str) -> TrackerInfo | None:
    from fwbench import plugins

    plugins.load()
    return _TRACKERS.get(name)


class Guarded:
    """A tracker whose failure costs its own figure only: its first exception stops it
    (later hooks are skipped, its result is None) and is said through `on_error`."""

    def __init__(self, name: str, tracker: Any, on_error: Callable[[str], None]) -> None:
        self.name = name
        self.tracker = tracker
        self.on_error = on_error
        self.failed = False

    @property
    def min_window_s(self) -> float:
        return 0.0 if self.failed else float(getattr(self.tracker, "min_window_s", 0.0))

    def __call__(self, hook: str, *args: Any) -> Any:
        if self.failed:
            return None
        try:
            return getattr(self.tracker, hook)(*args)
        except Exception as exc:
            traceback.print_exc()
            self.failed = True
            self.on_error(
                f"tracker {self.name!r} failed in {hook}: {one_line(exc)}; its figure is left out"
            )
            return None


def worker_trackers(
    adapter: Adapter, request: CaseRequest, on_error: Callable[[str], None]
) -> dict[str, Guarded]:
    """The worker trackers this request wants, made and guarded."""
    return _made("worker", on_error, request, adapter, request)


def driver_trackers(case: Case, on_error: Callable[[str], None]) -> dict[str, Guarded]:
    """The driver trackers of one case, made and guarded."""
    return _made("driver", on_error, None, case)


def _made(
    side: Literal["worker", "driver"],
    on_error: Callable[[str], None],
    request: CaseRequest | None,
    *args: Any,
) -> dict[str, Guarded]:
    found: dict[str, Guarded] = {}
    for info in trackers(side):
        try:
            wanted = getattr(info.make, "wanted", None)
            if request is not None and wanted is not None and not wanted(request):
                continue
            made = info.make(*args)
        except Exception as exc:
            on_error(f"tracker {info.name!r} could not start: {one_line(exc)}")
            continue
        found[info.name] = Guarded(info.name, made, on_error)
    return found


def record_fields(
    tracked: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Tracker results (worker's, then driver's, by name) as the record's fields: a
    declared field's value merged from every tracker that fills it, the results of
    trackers without one (for Result.tracked), each validated by its model, and what
    could not be recorded."""
    fields: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in tracked.items():
        info = tracker(name)
        if info is None or value is None:
            continue
        if info.field is None:
            assert info.model is not None
            try:
                extra[name] = info.model.model_validate(value).model_dump(mode="json")
            except ValidationError as exc:
                problems.append(
                    f"tracker {name!r}: its result does not fit its model, left out "
                    f"({exc.error_count()} error(s), first: {exc.errors()[0]['msg']})"
                )
        elif info.extends:
            if fields.get(info.field) is not None:
                fields[info.field] = _merge(fields[info.field], value)
        else:
            fields[info.field] = _merge(fields.get(info.field) or {}, value)
    return fields, extra, problems


def _merge(into: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    out = dict(into)
    for key, item in value.items():
        if isinstance(item, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], item)
        else:
            out[key] = item
    return out


# The built-in trackers -------------------------------------------------------------


class Memory(WorkerTracker):
    """Host RSS (baseline after import, steady-state peak) and the device allocator's
    peaks (the adapter's)."""

    def baseline(self) -> None:
        self.host = HostMemoryTracker()
        self.host.mark_baseline()

    def start(self) -> None:
        self.host.start_window()
        self.adapter.reset_device_memory(self.request.case.device)

    def stop(self, workload: Workload) -> dict[str, Any]:
        host = self.host.result()
        return {
            "host_baseline_bytes": host.baseline_rss_bytes,
            "host_peak_bytes": host.peak_rss_bytes,
            "host_framework_bytes": host.framework_bytes,
            "host_method": host.method,
            "device": self.adapter.device_memory(self.request.case.device),
        }


class Flops(WorkerTracker):
    """FLOPs of one step from the framework's counter (after the timed blocks, in the
    case's first run only)."""

    @classmethod
    def wanted(cls, request: CaseRequest) -> bool:
        # A data-parallel step runs collectives: counting it would cost every rank a step
        # outside the protocol. Not counted (the record says so: fwbench.api).
        return request.count_flops and not request.case.strategy

    def stop(self, workload: Workload) -> dict[str, Any]:
        try:
            flops, counter = self.adapter.count_flops(workload)
        except Exception as exc:  # a counter that cannot read a model must not lose the timing
            traceback.print_exc()
            return {"flops_per_step": None, "counter": None, "error": one_line(exc)}
        return {"flops_per_step": flops, "counter": counter}


class Energy(DriverTracker):
    """Energy counters (RAPL on the CPU, NVML on a GPU) read around each timed block."""

    def __init__(self, case: Case) -> None:
        super().__init__(case)
        counters, self.reasons = energy.counters_for(case.device)
        self.run = energy.EnergyAccumulator(counters)  # the run's blocks so far
        self.accumulator = energy.EnergyAccumulator(counters)  # the kept runs'
        self.min_window_s = energy.MIN_ENERGY_WINDOW_S if counters else 0.0

    def before_block(self) -> list[float]:
        return self.run.start()

    def after_block(self, token: Any, wall_s: float, steps: int) -> None:
        self.run.stop(token, wall_s, steps)

    def end_run(self, kept: bool) -> None:
        # A failed run's joules are not the case's, as its timing is not (NvmlPeak).
        if kept:
            self.accumulator.take(self.run)
        self.run = energy.EnergyAccumulator(self.run.counters)

    def result(self) -> dict[str, Any]:
        case = self.case
        if case.device == "cuda" and case.replicas > 1:
            # NVML's counter reads the first visible GPU only: per sample of its replica.
            found = energy.summarise(self.accumulator, self.reasons, case.batch_size)
            if found.source:
                found = found.model_copy(
                    update={
                        "source": f"{found.source}, first of {case.replicas} GPUs only "
                        "(per sample of its replica's batch; average power of that GPU)"
                    }
                )
            return found.model_dump()
        return energy.summarise(self.accumulator, self.reasons, case.global_batch_size).model_dump()


class NvmlPeak(DriverTracker):
    """Used memory of the case's GPU sampled through NVML during the steady state: the
    allocators' peaks miss the CUDA context, workspaces and fragmentation. (Interleaved
    GPU cases share the device, so each one's figure includes the others'.)"""

    def __init__(self, case: Case) -> None:
        super().__init__(case)
        self.peak: int | None = None
        self.pending: int | None = None
        self.sampler: NvmlMemorySampler | None = None

    def start(self) -> None:
        if self.case.device == "cuda":
            self.sampler = NvmlMemorySampler("cuda").__enter__()

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.__exit__(None, None, None)
            self.pending = self.sampler.peak_bytes
            self.sampler = None

    def end_run(self, kept: bool) -> None:
        # A failed run's peak (one that ran out of memory, say) is not the case's.
        if kept and self.pending is not None:
            self.peak = max(self.peak or 0, self.pending)
        self.pending = None

    def result(self) -> dict[str, Any] | None:
        return None if self.peak is None else {"device": {"nvml_used_peak_bytes": self.peak}}


register_tracker(TrackerInfo("memory", "worker", Memory, field="memory"))
register_tracker(TrackerInfo("flops", "worker", Flops, field="work"))
register_tracker(TrackerInfo("energy", "driver", Energy, field="energy"))
register_tracker(TrackerInfo("nvml", "driver", NvmlPeak, field="memory", extends=True))
