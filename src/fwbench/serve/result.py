"""ServingResult: the record of one serving point, built once by the driver and read by
every view (the `serving` table, `--json`, reports)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, model_validator

from fwbench.case import Case
from fwbench.result import SCHEMA_VERSION, Status, invocation_id_of_old
from fwbench.serve.spec import ServeSpec, point_key

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


class ServingResult(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION
    result_id: str
    invocation_id: str
    recorded_at: datetime
    point_key: str
    case: Annotated[Case, SkipValidation]
    spec: ServeSpec
    status: Status
    error: str | None = None
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
    param_count: int | None = None
    runs: tuple[ServingRun, ...] = ()
    log_dir: str | None = None  # LoadGen's logs of each run, beside the database
    # The command ended before the point's runs were all made: the figures are over the
    # runs it made, and a resumed command measures the point again.
    unfinished: bool = False
    # Shared by the points of one workload measured in rounds with it (run i of each in
    # round i; ServingRun.index): their verdicts pair runs by round. None: measured alone,
    # or stored before version 15.
    group_id: str | None = None
    warnings: tuple[str, ...] = ()
    environment: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _stored_case(cls, data: Any) -> Any:
        # Read back from JSON: the case as stored, not re-validated (its model's plugin
        # may not be loaded here), as Result.from_record reads one.
        if isinstance(data, dict) and isinstance(data.get("case"), dict):
            data = {**data, "case": Case.stored(data["case"])}
        # A record stored before version 11 names its invocation run_id.
        return invocation_id_of_old(data) if isinstance(data, dict) else data

    def latency(self, percentile: str) -> Figure | None:
        return self.latency_s.get(percentile)

    def ttft(self, percentile: str) -> Figure | None:
        return self.ttft_s.get(percentile)

    def tpot(self, percentile: str) -> Figure | None:
        return self.tpot_s.get(percentile)

    def to_record(self) -> dict[str, Any]:
        """The JSON form printed by `--json`: the record itself, with the case flat."""
        record = self.model_dump(mode="json", exclude={"case"})
        return {**self.case.model_dump(), "point_key": self.point_key, **record}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ServingResult:
        """The inverse of `to_record` (what `fwbench import` reads). The case is validated
        as an imported result's is (Case.recorded), and a record whose point key is not
        its case's and settings' is refused: it was edited, and would be stored as a point
        it is not. Raises ValidationError or ValueError."""
        case = Case.recorded(record)
        rest = {k: v for k, v in record.items() if k not in Case.model_fields}
        result = cls.model_validate({**rest, "case": case.model_dump()})
        expected = point_key(case, result.spec)
        if result.point_key != expected:
            raise ValueError(
                f"point_key {result.point_key!r} is not its case's and settings' ({expected!r})"
            )
        if not result.result_id:
            raise ValueError("result_id: empty; every record needs its own id")
        return result

    @staticmethod
    def is_record(record: dict[str, Any]) -> bool:
        """Whether a JSON record is a serving point's (it has a point key and settings)."""
        return "point_key" in record and "spec" in record
