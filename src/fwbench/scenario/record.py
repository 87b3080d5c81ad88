"""A serving point's part of its record (`Result.serving`): the scenario it ran, its
LoadGen runs and the figures over them. The rest of the record (identity, case, status,
environment) is a case's (fwbench.result.Result)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fwbench.errors import Status
from fwbench.scenario.spec import ServeSpec

# LoadGen's percentiles, as its log names them (result_<p>_percentile_latency_ns).
PERCENTILES: tuple[str, ...] = ("50.00", "90.00", "95.00", "97.00", "99.00", "99.90")


class LoadGenTest(BaseModel):
    """One LoadGen test, as its detail log reports it."""

    model_config = ConfigDict(frozen=True)

    scenario: str
    target_qps: float | None = None  # server: the scheduled rate
    validity: str  # VALID | INVALID
    invalid_reasons: tuple[str, ...] = ()
    latency_s: dict[str, float] = Field(default_factory=dict)  # percentile -> seconds
    mean_latency_s: float | None = None
    # Samples completed per second (offline, server) or queries per second without
    # LoadGen's overhead (single stream).
    samples_per_s: float | None = None
    # A streaming model's token latencies (LoadGen's, percentile -> seconds): the time
    # to a query's first token, and its time per output token after the first.
    ttft_s: dict[str, float] = Field(default_factory=dict)
    tpot_s: dict[str, float] = Field(default_factory=dict)
    mean_ttft_s: float | None = None
    mean_tpot_s: float | None = None
    tokens_per_s: float | None = None  # tokens completed per second
    query_count: int | None = None
    early_stopping: str | None = None
    wall_s: float


class ServingRun(BaseModel):
    """One worker process: its build, LoadGen's own overhead, and its tests."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(ge=0)
    launcher: str
    status: Status
    error: str | None = None
    build_s: float | None = None
    warmup_s: float | None = None
    # p50 latency of a no-op model served like the real one under LoadGen's
    # SingleStream (callback, queue, the main thread's answer): what the harness adds.
    overhead_s: float | None = None
    tests: tuple[LoadGenTest, ...] = ()
    # The test the run's figures come from: the only one, or the fastest valid probe of
    # a server search.
    main: int | None = None
    max_qps: float | None = None  # server search: the highest rate that met the bound
    # ... and the lowest rate above it that did not: the search's bracket.
    max_qps_above: float | None = None
    # Why the run has no valid figure (a bound below the unloaded latency, no rate met it).
    invalid_reason: str | None = None
    # CPU that other processes used while its LoadGen tests ran, in cores (None: not
    # measured, as in runs stored before it was).
    other_cpu_cores: float | None = None
    warnings: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _main_is_a_test(self) -> ServingRun:
        if self.main is not None and not 0 <= self.main < len(self.tests):
            raise ValueError(f"main: test {self.main} of {len(self.tests)}")
        return self

    @property
    def main_test(self) -> LoadGenTest | None:
        return self.tests[self.main] if self.main is not None else None


class Figure(BaseModel):
    """A value over runs: geometric mean of the runs' values, with a t interval on their
    logs (one run: no interval, ci_low = ci_high = value)."""

    model_config = ConfigDict(frozen=True)

    value: float = Field(gt=0)
    ci_low: float = Field(gt=0)
    ci_high: float = Field(gt=0)
    runs: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> Figure:
        if not self.ci_low <= self.value <= self.ci_high:
            raise ValueError("a figure's interval must contain its value")
        return self


class Serving(BaseModel):
    """What a serving point measured: its scenario and settings (`spec`, keyed with the
    case by `point_key`), its runs, and the figures over its valid runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    point_key: str
    spec: ServeSpec
    validity: str | None = None  # VALID when every run's figures come from a VALID test
    invalid_reasons: tuple[str, ...] = ()
    latency_s: dict[str, Figure] = Field(default_factory=dict)  # percentile -> figure
    samples_per_s: Figure | None = None
    # A streaming task's (a generation's): LoadGen's token latencies, percentile ->
    # figure, and tokens completed per second.
    ttft_s: dict[str, Figure] = Field(default_factory=dict)
    tpot_s: dict[str, Figure] = Field(default_factory=dict)
    tokens_per_s: Figure | None = None
    max_qps: Figure | None = None
    overhead_s: float | None = None  # median over runs
    # The rate search's resolution: the widest bracket (above / max_qps - 1) of any run.
    # Rates closer than this are not told apart.
    search_resolution: float | None = None
    runs: tuple[ServingRun, ...] = ()
    log_dir: str | None = None  # LoadGen's logs of each run, beside the database
    # The command ended before the point's runs were all made: the figures are over the
    # runs it made, and a resumed command measures the point again.
    unfinished: bool = False
    # Shared by the points of one workload measured in rounds with it (run i of each in
    # round i; ServingRun.index): their verdicts pair runs by round. None: measured alone,
    # or stored before version 15.
    group_id: str | None = None

    def latency(self, percentile: str) -> Figure | None:
        return self.latency_s.get(percentile)

    def ttft(self, percentile: str) -> Figure | None:
        return self.ttft_s.get(percentile)

    def tpot(self, percentile: str) -> Figure | None:
        return self.tpot_s.get(percentile)


# The fields a serving record stored before version 20 held beside its case's, now the
# record's `serving` part.
SERVING_FIELDS: frozenset[str] = frozenset(Serving.model_fields)


def serving_of_old(record: dict[str, Any]) -> dict[str, Any]:
    """`record`, with a serving record of a version before 20 (its scenario's fields
    beside the case's, `spec` among them) read into the `serving` part it has now."""
    if "spec" not in record or "serving" in record:
        return record
    rest = {k: v for k, v in record.items() if k not in SERVING_FIELDS}
    return {**rest, "serving": {k: v for k, v in record.items() if k in SERVING_FIELDS}}
