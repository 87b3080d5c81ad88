"""What a serving scenario asks for: MLPerf's three scenarios and their settings.

A serving point is a Case (an inference case: its framework, model, batch size, threads)
and a ServeSpec. The case's batch size means, per scenario:
- single_stream: every query carries one batch of `batch_size` inputs (MLPerf's
  SingleStream sends one sample; batch 1 is that), one query at a time;
- server: the dynamic batcher's largest batch (queries are one input each);
- offline: the batch the samples are run in.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fwbench.case import Case, validation_message
from fwbench.errors import SpecError
from fwbench.tasks import all_tasks, find_task

Scenario = Literal["single_stream", "server", "offline"]
SCENARIOS: tuple[str, ...] = ("single_stream", "server", "offline")
# Settings that only the server scenario reads; giving one to another is a mistake.
SERVER_ONLY: tuple[str, ...] = (
    "target_qps",
    "latency_bound_ms",
    "ttft_bound_ms",
    "tpot_bound_ms",
    "percentile",
    "max_wait_ms",
    "search_steps",
)
DEFAULT_BOUND_MS = 100.0
# A streaming task's (a generation's) bounds: on the first token and on each later one,
# MLPerf's Llama 2 70B Server constraints (TTFT 2 s, TPOT 200 ms at p99).
DEFAULT_TTFT_BOUND_MS = 2000.0
DEFAULT_TPOT_BOUND_MS = 200.0
# Settings of a query's latency, and of a stream's token latencies: a point takes one kind.
QUERY_BOUNDS: tuple[str, ...] = ("latency_bound_ms",)
TOKEN_BOUNDS: tuple[str, ...] = ("ttft_bound_ms", "tpot_bound_ms")
DEFAULT_PERCENTILE = 0.99
DEFAULT_MAX_WAIT_MS = 2.0
DEFAULT_SEARCH_STEPS = 6
_DEFAULTS: dict[str, float] = {
    "latency_bound_ms": DEFAULT_BOUND_MS,
    "ttft_bound_ms": DEFAULT_TTFT_BOUND_MS,
    "tpot_bound_ms": DEFAULT_TPOT_BOUND_MS,
    "percentile": DEFAULT_PERCENTILE,
    "max_wait_ms": DEFAULT_MAX_WAIT_MS,
    "search_steps": DEFAULT_SEARCH_STEPS,
}
LOADGEN_PERCENTILES: tuple[float, ...] = (0.5, 0.9, 0.95, 0.97, 0.99, 0.999)
# LoadGen's early stopping decides at 99% confidence.
_EARLY_STOPPING_CONFIDENCE = 0.99


# LoadGen takes its times as 64-bit nanoseconds and its rate as a double it schedules
# queries by: a bound of an hour and a million queries a second are past any serving
# question, and far inside what LoadGen can hold (1e100 ms failed inside it).
MAX_BOUND_MS = 3_600_000.0
MAX_QPS = 1_000_000.0


class ServeSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: Scenario
    # Server: Poisson arrivals at this rate; None searches for the highest rate whose
    # latency percentile stays under the bound (MLPerf's Server result).
    target_qps: float | None = Field(None, gt=0, le=MAX_QPS, allow_inf_nan=False)
    latency_bound_ms: float | None = Field(None, gt=0, le=MAX_BOUND_MS, allow_inf_nan=False)
    # A streaming task's bounds (a generation's): time to first token, and time per
    # output token after it; LoadGen holds both at the percentile.
    ttft_bound_ms: float | None = Field(None, gt=0, le=MAX_BOUND_MS, allow_inf_nan=False)
    tpot_bound_ms: float | None = Field(None, gt=0, le=MAX_BOUND_MS, allow_inf_nan=False)
    # One of the percentiles LoadGen reports (0.5, 0.9, 0.95, 0.97, 0.99, 0.999).
    percentile: float | None = None
    max_wait_ms: float | None = Field(None, ge=0, le=MAX_BOUND_MS, allow_inf_nan=False)
    search_steps: int | None = Field(None, ge=1, le=20)
    # Each LoadGen test lasts at least this long (and at least its query count).
    duration_s: float = Field(10.0, gt=0, le=3600, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("scenario"), str):
            name = data["scenario"].lower().replace("-", "_")
            data = {**data, "scenario": {"singlestream": "single_stream"}.get(name, name)}
        if isinstance(data, dict):
            # An explicit default names the same point as an omitted one (its identity,
            # --resume), as for cases.
            data = {k: v for k, v in data.items() if not (k in _DEFAULTS and v == _DEFAULTS[k])}
        return data

    @model_validator(mode="after")
    def _percentile(self) -> ServeSpec:
        if self.percentile is not None and self.percentile not in LOADGEN_PERCENTILES:
            raise ValueError(
                f"percentile: LoadGen reports {', '.join(f'{p:g}' for p in LOADGEN_PERCENTILES)}; "
                f"got {self.percentile:g}"
            )
        return self

    @model_validator(mode="after")
    def _server_settings(self) -> ServeSpec:
        if self.scenario != "server":
            given = [f for f in SERVER_ONLY if getattr(self, f) is not None]
            if given:
                raise ValueError(
                    f"{given[0]}: applies to the server scenario only (this is {self.scenario})"
                )
        elif self.target_qps is not None and self.search_steps is not None:
            raise ValueError("search_steps: a fixed target_qps is not searched; give one")
        if self.latency_bound_ms is not None and self.has_token_bounds:
            raise ValueError(
                "latency_bound_ms: bounds a query's latency; ttft_bound_ms and tpot_bound_ms "
                "bound a generation's tokens: give one kind"
            )
        return self

    @classmethod
    def build(cls, **fields: Any) -> ServeSpec:
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise SpecError(f"serve: {validation_message(exc)}") from None

    # The server's settings with their defaults (None on other scenarios).
    @property
    def bound_s(self) -> float:
        return (self.latency_bound_ms or DEFAULT_BOUND_MS) / 1e3

    @property
    def ttft_bound_s(self) -> float:
        return (self.ttft_bound_ms or DEFAULT_TTFT_BOUND_MS) / 1e3

    @property
    def tpot_bound_s(self) -> float:
        return (self.tpot_bound_ms or DEFAULT_TPOT_BOUND_MS) / 1e3

    @property
    def has_token_bounds(self) -> bool:
        return any(getattr(self, f) is not None for f in TOKEN_BOUNDS)

    @property
    def bound_percentile(self) -> float:
        return self.percentile or DEFAULT_PERCENTILE

    @property
    def wait_s(self) -> float:
        return (DEFAULT_MAX_WAIT_MS if self.max_wait_ms is None else self.max_wait_ms) / 1e3

    @property
    def steps(self) -> int:
        return self.search_steps or DEFAULT_SEARCH_STEPS

    @property
    def searches(self) -> bool:
        return self.scenario == "server" and self.target_qps is None

    def label(self, streams: bool = False) -> str:
        """How tables and progress name it; `streams`: the point's task streams tokens,
        so its bounds are on them."""
        if self.scenario != "server":
            return self.scenario
        p = f"p{self.bound_percentile * 100:g}"
        bound = f"{p}<={self.bound_s * 1e3:g}ms"
        if streams:
            bound = f"{p} ttft<={self.ttft_bound_s * 1e3:g}ms tpot<={self.tpot_bound_s * 1e3:g}ms"
        rate = "max qps" if self.target_qps is None else f"{self.target_qps:g} qps"
        return f"server {rate} {bound} wait {self.wait_s * 1e3:g}ms"


def min_queries(percentile: float) -> int:
    """Queries LoadGen's early stopping needs before it can accept a percentile bound
    even when no query was over it: the smallest n with percentile**n <= 1%. With fewer,
    a short run is INVALID whatever its latencies (p90: 44, p99: 459)."""
    return math.ceil(math.log(1 - _EARLY_STOPPING_CONFIDENCE) / math.log(percentile))


def point_key(case: Case, spec: ServeSpec) -> str:
    """Identity of a serving point: its case and its scenario settings. Where a user's
    model lies is not its identity, as it is not a case's (Case.key): the same file
    elsewhere is the same point, found again by --resume and compared."""
    return _point_key(case.flat(exclude={"model_path"}), spec)


def point_key_before_2026_12(case: Case, spec: ServeSpec) -> str:
    """The key a point was stored under before (its model's path in it): a record
    exported then still reads (Result._check_derived)."""
    return _point_key(case.flat(), spec)


def _point_key(flat: dict[str, Any], spec: ServeSpec) -> str:
    canonical = json.dumps(
        {"case": flat, "serve": spec.model_dump(exclude_none=True)}, sort_keys=True
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def check_case(case: Case) -> None:
    """Serving runs inference on one device: refuse what it cannot serve, in one line."""
    task = find_task(case.task)
    if task is None or not task.serves:
        served = " or ".join(t.name for t in all_tasks().values() if t.serves)
        raise SpecError(
            f"serve: {case.label()}: serving answers queries; set task: {served} (a task "
            f"that answers a query with one step)"
        )
    if case.strategy:
        raise SpecError(f"serve: {case.label()}: data-parallel cases are not served")


def streams(case: Case) -> bool:
    """Whether the case's task answers with a stream of tokens (timed token by token)."""
    task = find_task(case.task)
    return task is not None and task.streams


def point_label(case: Case, spec: ServeSpec) -> str:
    """How progress, warnings and tables name a point: its case and its scenario."""
    return f"{case.label()} {spec.label(streams(case))}"


def check_point(case: Case, spec: ServeSpec) -> None:
    """A case and the scenario it is served in: the case as check_case, and bounds of
    the kind its task answers with (a query's latency, or a stream's token latencies)."""
    check_case(case)
    wrong, right = (QUERY_BOUNDS, TOKEN_BOUNDS) if streams(case) else (TOKEN_BOUNDS, QUERY_BOUNDS)
    given = [f for f in wrong if getattr(spec, f) is not None]
    if given:
        raise SpecError(
            f"serve: {case.label()}: {given[0]} does not apply to task {case.task}; "
            f"its bounds are {' and '.join(right)}"
        )
