"""Messages between the launcher and a worker, as JSON lines.

The launcher writes a request as the first line of the worker's stdin. A serve request
is answered by one `report` line; a count or peak request by `started` once the worker
has imported its framework (the time-out for the work starts there), then one `report`
line. A case request is answered by `built`
once the worker has built the workload (or by a `report` if that failed); then the
driver (fwbench.launch.local) decides what follows, and the worker answers:
`{"op": "calibrate", "timing": {...}}` with `calibrated` and the `prepared` first step,
warmup and block size (`timing.calibrate` under those rules, steps back to back);
`{"op": "block", "warm": n, "steps": k}` with a `block` line holding the seconds of k
timed steps closed by one sync (after n untimed ones, when blocks alternate with another
process); `{"op": "overhead"}` with the cost of a sync in `seconds`; `{"op": "steady"}`
with `steady` once the steady state's trackers have started; `{"op": "finish"}` with
the final `report`. The worker writes its lines to its original stdout; everything the
frameworks print goes to the log instead. Each rank of a data-parallel case speaks the
same protocol over a socket, but `calibrate`, which their RankGroup
(fwbench.launch.rank_group) answers itself over their blocks, in lockstep.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from fwbench.case import Case
from fwbench.errors import Status
from fwbench.measure.runs import RunPlan
from fwbench.measure.settings import TimingConfig
from fwbench.measure.timing import RunStop, RunTiming
from fwbench.measure.verdicts import Reading
from fwbench.scenario.spec import ServeSpec


class CaseRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["case"] = "case"
    case: Case
    timing: RunTiming  # how each run is timed (the driver sends it again with `calibrate`)
    count_flops: bool = True
    # `fwbench explain`: profile this many steps after the measurement.
    profile_steps: int = 0
    trace_path: str | None = None
    category_rules: tuple[tuple[str, str], ...] = ()
    # A folder the runs of one command share for compiled programs (Adapter.compile_cache).
    compile_cache: str | None = None
    # Where a user's model's outputs are written for the check across frameworks
    # (launch/outputs.py): the first run's only.
    outputs_path: str | None = None


class CountItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    dims: dict[str, int]  # the model's dimensions, as in Case.dims
    # What resolves a user's model (Case.reference) when its name alone does not.
    reference: str | None = None
    # Also count the FLOPs of one inference step at batch size 1 (builds a workload).
    flops: bool = False


class CountRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["count"] = "count"
    framework: str
    items: tuple[CountItem, ...]


class PeakRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["peak"] = "peak"
    framework: str
    device: str
    threads: int
    dtypes: tuple[str, ...]
    n: int
    timing: RunTiming
    stop: RunStop


class ServeRequest(BaseModel):
    """A serving point: each of its runs builds, warms up and runs LoadGen
    (fwbench.serve.loadgen) in a fresh worker."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["serve"] = "serve"
    case: Case
    spec: ServeSpec
    timing: RunTiming  # its warmup settings
    # LoadGen's logs go here: the driver sends each run its own `run<k>/` below it.
    log_dir: str
    # LoadGen's seeds (its arrival schedule): the round's, so that runs draw their own
    # arrivals and the points of one round, paired, meet the same ones.
    seed: int = 0


Request = CaseRequest | CountRequest | PeakRequest | ServeRequest


@dataclass(frozen=True)
class GroupRequest:
    """One variant of a group as an executor is given it: a case's timed blocks or a
    serving point. `sent` is what each of its workers is sent; how many runs it gets and
    when they stop (`plan`), and how the group's verdict reads them (`reading`), stay
    with the driver."""

    sent: CaseRequest | ServeRequest
    plan: RunPlan
    reading: Reading

    @classmethod
    def for_case(cls, case: Case, settings: TimingConfig, **sent: Any) -> GroupRequest:
        """A case measured under `settings`: each run timed by its `run` part (sent with
        `sent`'s other fields of CaseRequest), planned and read by the others."""
        request = CaseRequest(case=case, timing=settings.run, **sent)
        return cls(request, settings.plan, settings.reading)

    @property
    def case(self) -> Case:
        return self.sent.case

    @property
    def timing(self) -> RunTiming:
        return self.sent.timing


class CaseReport(BaseModel):
    """The worker's account of one case; the timing itself is assembled by the launcher."""

    status: Status
    error: str | None = None
    build_s: float | None = None
    param_count: int | None = None
    # The worker trackers' results by tracker name (fwbench.measure.trackers).
    tracked: dict[str, Any] = {}
    breakdown: dict[str, Any] | None = None
    # Data-parallel cases: strategy, replicas, batches, backend, communication time.
    distributed: dict[str, Any] | None = None
    environment: dict[str, Any] = {}
    settings: dict[str, Any] = {}


class CountReport(BaseModel):
    counts: list[int | None]
    errors: list[str | None]
    flops: list[float | None] = []
    framework_version: str | None = None


class PeakReport(BaseModel):
    # dtype -> {"flops_per_s", "median_s", "ci_low_s", "ci_high_s"} or {"error"}
    results: dict[str, dict[str, Any]]
    environment: dict[str, Any] = {}
    settings: dict[str, Any] = {}


class ServeReport(BaseModel):
    status: Status
    error: str | None = None
    # fwbench.scenario.record.ServingRun's fields but index and launcher (the launcher's).
    run: dict[str, Any] = {}
    param_count: int | None = None
    environment: dict[str, Any] = {}
    settings: dict[str, Any] = {}
