"""Result: the immutable, validated record of one case, as stored and as exported.

Schema history: the one schema version, of the record and of the results database (bump
SCHEMA_VERSION, add the database migration in fwbench.store.schema, whose docstring lists
each version's tables, and give new fields defaults that mean what the migration fills in,
so `Result.from_record` reads exported JSON of every earlier version):
  1  first version: case fields, status, step-time statistics with every sample,
     start-up times, parameter parity, environment and settings.
  2  memory (host RSS baseline and steady-state peak, device allocator peaks), energy
     (measured or unavailable with its reason), work (FLOPs per step, achieved FLOP/s,
     share of the measured peak).
  3  breakdown (`fwbench explain`: time per step by category of operation).
  4  case dimensions of token and spectrogram models: seq_len, vocab_size, freq_bins.
  5  case precision, layout and autotune.
  6  data parallelism: case fields strategy and world_size (None on single-device
     cases); distributed (replicas, processes, per-replica and global batch, backend,
     communication time); throughput counts the global batch.
  7  runs: a case is several worker processes; measurement.runs keeps each (samples,
     median, start-up, launcher, other processes' load); step_time_s is the geometric
     mean of the run medians with a t interval over runs (ci_method says which); samples
     are every run's blocks. Results of version <= 6 read as one run.
  8  serving results (then fwbench.serve.result.ServingResult): a record of their own, in
     a table of their own; the case record is unchanged.
  9  tracked: results of trackers the record has no field of its own for (plugins'
     trackers, fwbench.measure.trackers), by tracker name; {} before.
 10  case options: the framework's own switches the case set (`--options onednn=off`),
     None before (the framework decided); part of the key only when set.
 11  invocation_id in place of run_id (the id of the command invocation that recorded
     the result; "run" now means a worker process only), in Result and ServingResult.
     Records of earlier versions are read with their run_id as invocation_id.
 12  case task_dims: the task's own dimensions (fwbench.tasks, e.g. a generation's
     `new_tokens=32`), None for tasks without any (every task before this version).
 13  figures: the task's own figures beyond the step time (fwbench.tasks.Figure, e.g. a
     generation's time to first token and time per output token): in each run its
     values per block and their median (runs[].figures), and the case's estimate over
     runs with its interval (measurement.figures); {} for train and infer, and before.
 14  group_id: the id shared by the variants measured with it in rounds (their blocks
     alternating, run i of each made in round i), whose verdicts pair their runs by
     round; None when it was measured alone, and before this version (read unpaired).
 15  (serving records only: their group_id; the case record is unchanged.)
 16  case model_path, inputs, objective: a user's model (fwbench.catalog.sources): what
     resolves it, its input signature and its training objective; None for the zoo's
     models, and before this version.
 17  the settings it was measured under, typed and split by who reads them, in place of
     the timing_config dict: run_timing (how each run was timed), run_plan (how many
     runs and when they stopped) and reading (the estimator its verdicts read, and the
     equivalence band, new: 2% before). Records of earlier versions are read from their
     timing_config: each setting it holds, and for one their version lacked, what
     measuring without it meant (`UNRECORDED`: each run's median, runs that stopped on
     their precision, one of them, one untimed step after a switch, no shared compile
     cache), or else its default.
 18  runs[].reopened: the run was made after its comparison, stopped when its share of a
     sweep's budget was spent, was re-opened with the time the budget had left (false
     before this version).
 19  case dims: the model's dimensions as one mapping, name -> value (any a model
     declares), in place of the fields input_size, seq_len, vocab_size, freq_bins and
     num_classes, which records of earlier versions hold and are read into it. A case's
     key lists them as before, so it is unchanged.
 20  serving: a serving point's record is a Result, its scenario's part in `serving`
     (fwbench.scenario.record.Serving: the spec and point key, LoadGen's runs and the
     figures over them), None for a case. Serving records of earlier versions, their
     scenario's fields beside the case's, are read into it (serving_of_old).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, model_validator

from fwbench.case import Case
from fwbench.errors import Status
from fwbench.explain.breakdown import Breakdown
from fwbench.measure import verdicts
from fwbench.measure.energy import Energy
from fwbench.measure.runs import RunPlan
from fwbench.measure.settings import PART_OF, TimingConfig
from fwbench.measure.timing import RunTiming
from fwbench.measure.verdicts import Reading
from fwbench.models.parity import Parity
from fwbench.scenario.record import Serving, serving_of_old
from fwbench.scenario.spec import point_key, point_key_before_2026_12
from fwbench.tasks import STEP_TIME, verdict_figure

SCHEMA_VERSION = 20
STATUSES: tuple[str, ...] = ("ok", "oom", "error", "timeout", "unsupported")
# The first version whose records name their command invocation invocation_id.
INVOCATION_ID_SINCE = 11
RUNS_SINCE = 7  # a measured record holds its runs


# The first version whose records hold their settings typed, by part.
SETTINGS_SINCE = 17
# What a record that does not say how it was measured reads as: one written before a
# setting existed, or built without its settings. Verdicts read each run's median (the
# only reading before the estimator, 2026-11-24) at a fixed level (its runs stopped on
# their precision: the plan of verdicts read as the runs come began with `stop_on`),
# over one run (before runs, version 7); a block after a switch began after one untimed
# step (before `min_switch_warm_s`), and every run compiled for itself (before the
# command's compile cache). Any other setting reads as its default.
UNRECORDED = TimingConfig(
    run=RunTiming(min_switch_warm_s=0.0, compile_cache=False),
    plan=RunPlan(min_runs=1, max_runs=1, stop_on="precision"),
    reading=Reading(estimator="median"),
)


def settings_of_old(timing_config: dict[str, Any]) -> TimingConfig:
    """The typed settings of a record written before SETTINGS_SINCE, from its
    timing_config: each setting it recorded, and UNRECORDED's for the others. (No
    setting was ever renamed or dropped; a name this fwbench does not know is left out,
    as nothing could read it.)"""
    known = {k: v for k, v in timing_config.items() if k in PART_OF}
    return TimingConfig.model_validate(UNRECORDED.flat() | known)


def cases_and_points(results: Sequence[Result]) -> tuple[list[Result], list[Result]]:
    """`results` split into the cases' (a measurement) and the serving points' (a
    `serving` part), each in its order: the views that read both read each its own way."""
    return [r for r in results if r.serving is None], [r for r in results if r.serving]


def invocation_id_of_old(record: dict[str, Any]) -> dict[str, Any]:
    """`record`, with the run_id of a record written before INVOCATION_ID_SINCE (every
    older export, every stored serving record) read as its invocation_id."""
    version = record.get("schema_version")
    old = isinstance(version, int) and version < INVOCATION_ID_SINCE
    if not old or "run_id" not in record or "invocation_id" in record:
        return record
    return {("invocation_id" if k == "run_id" else k): v for k, v in record.items()}


class StepTime(BaseModel):
    # Infinity and NaN are no time (json reads them; a damaged export can hold them).
    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    median: float = Field(gt=0)
    ci_low: float = Field(gt=0)
    ci_high: float = Field(gt=0)

    @model_validator(mode="after")
    def _ordered(self) -> StepTime:
        if not self.ci_low <= self.median <= self.ci_high:
            raise ValueError("step time interval must contain the median")
        return self


class Blocks(BaseModel):
    """Timed blocks and how they were reached: start-up, warmup, block size, stop."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    samples: tuple[float, ...] = Field(min_length=1)  # seconds per step, one per block
    steps_per_block: int = Field(ge=1)
    build_s: float = Field(ge=0)
    first_step_s: float = Field(ge=0)
    warmup_steps: int = Field(ge=0)
    warmup_s: float = Field(ge=0)
    warmup_stop: str
    stop_reason: str
    sync_overhead_s: float = Field(ge=0)

    @model_validator(mode="after")
    def _timed(self) -> Blocks:
        # A block that took no time, or less, is no measurement (p25 of it reads nan).
        if min(self.samples) <= 0:
            raise ValueError("samples: every block's time per step must be above 0")
        return self


class RunFigure(BaseModel):
    """One of its task's own figures in one run (fwbench.tasks.Figure: a generation's time
    to first token, ...): the workload's value in each timed block, in seconds, and their
    median. Estimators read it as they read a run's step times."""

    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    samples: tuple[float, ...] = Field(min_length=1)
    median_s: float = Field(gt=0)

    @model_validator(mode="after")
    def _timed(self) -> RunFigure:
        if min(self.samples) <= 0:
            raise ValueError("samples: every block's value must be above 0")
        return self


class Run(Blocks):
    """One worker process of a case: its own start-up, warmup and timed blocks. The
    driver records it so when the run ends (fwbench.launch.rounds), its stopping rules
    and verdicts read it, and it is stored as it is."""

    index: int = Field(ge=0)  # its place in the case's schedule (runs alternate in time)
    median_s: float = Field(gt=0)
    ci_low_s: float = Field(gt=0)  # 95% CI of this run's median: within-process only
    ci_high_s: float = Field(gt=0)
    launcher: str  # fork-server | spawn (and why, when a fork server was refused)
    # CPU time other processes used during its timed blocks, in cores (psutil).
    other_cpu_cores: float | None = None
    warnings: tuple[str, ...] = ()
    # What the run cost outside its build, warmup and blocks, in seconds: its start
    # (process, imports, device) and its final report. None before they were recorded.
    start_s: float | None = Field(None, ge=0)
    finish_s: float | None = Field(None, ge=0)
    # Its task's figures beyond the step time, by name ({} for train and infer).
    figures: dict[str, RunFigure] = Field(default_factory=dict)
    # Made after its comparison, stopped by its share of a sweep's budget, was re-opened
    # with the time the budget had left (False before version 18).
    reopened: bool = False

    @model_validator(mode="after")
    def _interval(self) -> Run:
        if not self.ci_low_s <= self.median_s <= self.ci_high_s:
            raise ValueError(f"run {self.index}: its interval must contain its median")
        return self

    @property
    def steady_s(self) -> float:
        """Seconds of its timed blocks (what a case's time budget counts)."""
        return sum(self.samples) * self.steps_per_block


class Measurement(Blocks):
    """What the timing found; present only when status is ok. step_time_s is the case's
    estimate over its runs; samples are every run's blocks, the start-up fields the first
    run's, stop_reason why no more runs were made."""

    step_time_s: StepTime
    runs: tuple[Run, ...] = ()  # empty in results recorded before runs (schema <= 6)
    ci_method: str = "within one process (recorded before runs)"
    # Its task's figures beyond the step time, each estimated over the runs as the step
    # time is (their geometric mean, with the same interval): {} for train and infer.
    figures: dict[str, StepTime] = Field(default_factory=dict)
    # Shared by the variants measured with it in rounds, their blocks alternating: run i
    # of each was made in round i, so their verdicts pair runs by round. None: measured
    # alone (or before version 14).
    group_id: str | None = None

    @model_validator(mode="after")
    def _rounds(self) -> Measurement:
        # A run's index is its round: two of one index would pair with one run twice.
        indices = [run.index for run in self.runs]
        if len(set(indices)) != len(indices):
            raise ValueError("runs: two runs of one index (a run's index is its round)")
        return self

    def per_run(self, estimator: str = "median", figure: str = STEP_TIME.name) -> tuple[float, ...]:
        """One value per process of `figure` (the step time unless named), by the
        estimator: what verdicts, ratios and trends are built on
        (fwbench.measure.verdicts). A result recorded before runs is one."""
        if figure == STEP_TIME.name:
            return verdicts.per_run(self.runs, estimator) or (self.step_time_s.median,)
        series = [run.figures[figure] for run in self.runs if figure in run.figures]
        if not series:
            raise ValueError(f"figure: this measurement has no {figure}")
        return verdicts.per_run(series, estimator)

    def rounds(self, figure: str = STEP_TIME.name) -> tuple[int, ...]:
        """The round of each of `per_run`'s values (a run's index is its round)."""
        if figure == STEP_TIME.name:
            return tuple(run.index for run in self.runs) or (0,)
        return tuple(run.index for run in self.runs if figure in run.figures)

    @property
    def reopened(self) -> bool:
        """Some of its runs were made after its comparison was re-opened (Run.reopened)."""
        return any(run.reopened for run in self.runs)

    def figure(self, name: str = STEP_TIME.name) -> StepTime:
        """The case's estimate of `figure` over its runs, with its interval."""
        if name == STEP_TIME.name:
            return self.step_time_s
        if name not in self.figures:
            raise ValueError(f"figure: this measurement has no {name}")
        return self.figures[name]


class Memory(BaseModel):
    model_config = ConfigDict(frozen=True)

    host_baseline_bytes: int = Field(ge=0)  # worker RSS after the import, before the build
    host_peak_bytes: int = Field(ge=0)  # worker RSS peak during the steady state
    host_framework_bytes: int  # peak minus baseline: what the case itself holds
    host_method: str
    device: dict[str, int] | None = None  # allocator peaks (GPU); None on the CPU


class Work(BaseModel):
    model_config = ConfigDict(frozen=True)

    flops_per_step: float | None = None
    counter: str | None = None
    error: str | None = None
    achieved_flops_per_s: float | None = None
    # `fwbench peak` on this host, in the case's precision (fp32, tf32, bf16 or fp16).
    peak_flops_per_s: float | None = None
    peak_dtype: str | None = None
    share_of_peak: float | None = None


class Communication(BaseModel):
    """Gradient communication seen by the framework's profiler (fwbench.distributed.comm)."""

    model_config = ConfigDict(frozen=True)

    profiler: str | None = None
    profiled_steps: int | None = None
    profiled_step_s: float | None = None
    in_flight_s: float | None = None  # per step, union of communication ops' intervals
    share_of_step: float | None = None
    ops: list[str] = Field(default_factory=list)
    error: str | None = None  # why there is no figure


class Distributed(BaseModel):
    """How a data-parallel case ran (its strategy and replicas are in the case)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    strategy: str
    strategy_label: str
    replicas: int
    processes: int
    per_replica_batch_size: int
    global_batch_size: int
    batch_semantics: str
    threads_per_process: int
    timed_rank: str
    backend: str | None = None
    launcher: str | None = None
    communication: Communication | None = None


class Result(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = SCHEMA_VERSION
    result_id: str
    invocation_id: str
    recorded_at: datetime
    # Not re-validated here: a stored case stays readable when its model's plugin is
    # not loaded; cases are validated where they are made (Case.build).
    case: Annotated[Case, SkipValidation]
    status: Status
    error: str | None = None
    measurement: Measurement | None = None
    param_count: int | None = None
    parity: Parity | None = None
    memory: Memory | None = None
    energy: Energy | None = None
    work: Work | None = None
    breakdown: Breakdown | None = None
    distributed: Distributed | None = None
    warnings: tuple[str, ...] = ()
    environment: dict[str, Any] = Field(default_factory=dict)
    settings: dict[str, Any] = Field(default_factory=dict)
    # How it was measured and how its verdicts read it (fwbench.measure.settings).
    run_timing: RunTiming = UNRECORDED.run
    run_plan: RunPlan = UNRECORDED.plan
    reading: Reading = UNRECORDED.reading
    # Trackers without a field above (fwbench.measure.trackers), validated by their model.
    tracked: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # A serving point's (`fwbench serve`, a sweep's `serve`): its scenario, LoadGen runs
    # and figures, in place of a measurement. None: a case's.
    serving: Serving | None = None

    @model_validator(mode="before")
    @classmethod
    def _stored(cls, data: Any) -> Any:
        # A serving row's record, read back from JSON: the case as stored, not
        # re-validated (its model's plugin may not be loaded here), and the shape of
        # earlier versions read as today's.
        if not isinstance(data, dict):
            return data
        if isinstance(data.get("case"), dict):
            data = {**data, "case": Case.stored(data["case"])}
        return serving_of_old(invocation_id_of_old(data))

    @model_validator(mode="after")
    def _consistent(self) -> Result:
        if self.serving is not None and self.measurement is not None:
            raise ValueError("a serving point's result has its serving part, no measurement")
        if self.status == "ok" and self.measurement is None and self.serving is None:
            raise ValueError("an ok result needs its measurement (or its serving part)")
        if self.status != "ok" and not self.error:
            raise ValueError(f"a {self.status} result needs its reason in `error`")
        if self.status != "ok" and self.measurement is not None:
            # Claims and views count a measurement as measured, whatever the status.
            raise ValueError(f"a {self.status} result has no measurement")
        return self

    @property
    def case_key(self) -> str:
        return self.case.key()

    @property
    def global_batch_size(self) -> int:
        return self.case.global_batch_size

    @property
    def served(self) -> Serving:
        """The serving part of a serving point's result (raises for a case's: read it
        where only serving points are, as the store's `serving()` gives them)."""
        if self.serving is None:
            raise ValueError(f"{self.case_key} is a case's result, not a serving point's")
        return self.serving

    @property
    def point_key(self) -> str:
        """A serving point's key (its case and scenario settings), as today's fwbench
        makes it: a point stored before its model's path left the key is found again."""
        return point_key(self.case, self.served.spec)

    @property
    def throughput(self) -> float | None:
        """Units of its task (samples; a generation's tokens) per second at the median
        step time, over all replicas."""
        if self.measurement is None:
            return None
        return self.case.units_per_step / self.measurement.step_time_s.median

    @property
    def communication_s(self) -> float | None:
        """Gradient communication in flight per step, where the profiler showed it."""
        d = self.distributed
        return d.communication.in_flight_s if d and d.communication else None

    @property
    def looks(self) -> verdicts.Looks | None:
        """The sequential plan its verdicts are read under (RunPlan.looks; None: a fixed
        interval)."""
        return self.run_plan.looks

    @property
    def verdict_figure(self) -> str:
        """The figure its verdicts read: its task's first (a generation's time per output
        token), where it was measured; the step time otherwise (a task whose plugin is
        not loaded here, a result recorded before figures)."""
        name, m = verdict_figure(self.case.task), self.measurement
        return name if m is not None and name in m.figures else STEP_TIME.name

    @property
    def different_work(self) -> bool:
        """Parameter counts differ between frameworks, an inference runtime's optimised
        graph lacks a fusion every deployment has (settings.fusion_check, written by
        fwbench.frameworks.onnx_graph), a runtime's outputs differ from its source
        framework's beyond the tolerance (settings.output_check, written by the inference
        runtimes), generations from the same weights made other tokens
        (settings.token_check, written by fwbench.launch.records.check_outputs), LoRA
        runs trained different numbers of parameters (settings.trained_check), or a user's model's
        outputs on the same inputs differ (settings.output_agreement). Read from the
        stored settings, so results recorded before the checks read as they did."""
        return self.different_work_reason is not None

    @property
    def different_work_reason(self) -> str | None:
        """Why this result is not the same work as its framework's peers, or None."""
        if self.parity is not None and self.parity.mismatch:
            return f"parameter counts differ ({self.parity.describe()})"
        fusion = self.settings.get("fusion_check")
        if isinstance(fusion, str) and fusion.startswith("failed"):
            return f"the runtime's graph lacks a deployment's fusions ({fusion})"
        checked = self.settings.get("output_check")
        if checked in ("differs", "failed"):
            error = self.settings.get("output_max_rel_error")
            tolerance = self.settings.get("output_tolerance")
            measured = f": max error {error:.2g} of the largest output" if error else ""
            if error and tolerance:
                measured += f", tolerance {tolerance:g}"
            return f"the runtime's outputs differ from its source framework's{measured}"
        tokens = self.settings.get("token_check")
        if isinstance(tokens, str) and tokens.startswith("failed"):
            return f"the generations differ ({tokens})"
        trained = self.settings.get("trained_check")
        if isinstance(trained, str) and trained.startswith("failed"):
            return trained.removeprefix("failed: ")
        outputs = self.settings.get("output_agreement")
        if isinstance(outputs, str) and outputs.startswith("failed"):
            return f"the frameworks' outputs differ ({outputs})"
        return None

    def to_record(self) -> dict[str, Any]:
        """The flat JSON form printed by `--json` and exported; stable keys."""
        m = self.measurement
        record: dict[str, Any] = {
            "schema_version": self.schema_version,
            "result_id": self.result_id,
            "invocation_id": self.invocation_id,
            "case_key": self.case_key,
            "recorded_at": self.recorded_at.isoformat(),
            **self.case.model_dump(),
            "status": self.status,
            "error": self.error,
            "step_time_s": m.step_time_s.model_dump() if m else None,
            "global_batch_size": self.global_batch_size,
            "throughput": self.throughput,
            "samples": list(m.samples) if m else [],
            "param_count": self.param_count,
            "parity": self.parity.model_dump() if self.parity else None,
            "different_work": self.different_work,
            "memory": self.memory.model_dump() if self.memory else None,
            "energy": self.energy.model_dump() if self.energy else None,
            "work": self.work.model_dump() if self.work else None,
            "breakdown": self.breakdown.model_dump() if self.breakdown else None,
            "distributed": self.distributed.model_dump() if self.distributed else None,
            "warnings": list(self.warnings),
        }
        if m:
            record |= m.model_dump(exclude={"step_time_s", "samples"})
        record |= {
            "environment": self.environment,
            "settings": self.settings,
            "run_timing": self.run_timing.model_dump(),
            "run_plan": self.run_plan.model_dump(),
            "reading": self.reading.model_dump(),
            "tracked": self.tracked,
        }
        if self.serving is not None:
            # A serving point's part; a case's record has none (its table has no column).
            record["serving"] = self.serving.model_dump(mode="json")
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Result:
        """The inverse of `to_record`, for a record of this or any earlier schema version.

        Every field added since version 1 has a default that means what the database
        migrations fill in (None: not measured then; no runs: one process), so an older
        record reads the way the same result reads from a migrated database. The case is
        validated (Case.recorded); derived keys (case_key, throughput, different_work,
        global_batch_size) are recomputed, and so are its estimates from its runs' blocks
        (_check_estimates); a record whose own differ, or that gives null where fwbench
        never writes one, is refused: it was edited or damaged, and would be stored as
        something it does not say.
        """
        version = record.get("schema_version")
        if version is None:
            raise ValueError(
                "schema_version: missing; not a record fwbench wrote (fwbench export, "
                "run --json and results --json write them)"
            )
        if not isinstance(version, int) or not 1 <= version <= SCHEMA_VERSION:
            newer = isinstance(version, int) and version > SCHEMA_VERSION
            raise ValueError(
                f"schema_version: {version!r} is not one this fwbench reads "
                f"(1 to {SCHEMA_VERSION})" + ("; a newer fwbench wrote it?" if newer else "")
            )
        record = serving_of_old(invocation_id_of_old(record))
        # A record of an older version re-exported from a migrated database holds its
        # settings typed (the migration filled them): those are its own; only a record
        # as that version wrote it has them in timing_config.
        if version < SETTINGS_SINCE and not {"run_timing", "run_plan", "reading"} <= set(record):
            old = settings_of_old(record.get("timing_config") or {})
            record = {
                **{k: v for k, v in record.items() if k != "timing_config"},
                "run_timing": old.run,
                "run_plan": old.plan,
                "reading": old.reading,
            }
        _check_keys(record, version)
        # Fields a record of its version did not have take the defaults they had then.
        case = Case.recorded(record)
        measurement = None
        if record.get("step_time_s"):
            fields = {f: record[f] for f in Measurement.model_fields if f in record}
            measurement = Measurement.model_validate(
                {**fields, "step_time_s": record["step_time_s"], "samples": record["samples"]}
            )
        known = set(cls.model_fields) - {"case", "measurement"}
        result = cls.model_validate(
            {
                **{k: v for k, v in record.items() if k in known and v is not None},
                "case": case,
                "measurement": measurement,
            }
        )
        result._check_derived(record)
        if result.measurement is not None:
            _check_estimates(result.measurement)
        return result

    def _check_derived(self, record: dict[str, Any]) -> None:
        if self.serving is not None:
            expected = point_key(self.case, self.serving.spec)
            legacy = point_key_before_2026_12(self.case, self.serving.spec)
            if self.serving.point_key not in (expected, legacy):
                raise ValueError(
                    f"point_key {self.serving.point_key!r} is not its case's and settings' "
                    f"({expected!r}); was it edited?"
                )
        if not self.result_id.strip():
            # An id is what a later import skips a record by: two records without one
            # would be taken for one, and the second silently dropped.
            raise ValueError("result_id: empty or missing; every record needs its own id")
        for key in DERIVED_KEYS:
            ours = getattr(self, key)
            if key not in record:
                continue
            given = record[key]
            if given is None and ours is None:  # an unmeasured result's throughput
                continue
            same = (
                isinstance(given, int | float)
                and not isinstance(given, bool)
                and math.isclose(given, ours, rel_tol=1e-9)
                if isinstance(ours, float)
                else type(given) is type(ours) and given == ours
            )
            if not same:
                raise ValueError(
                    f"{key}: {given!r} does not match the record's case and measurement "
                    f"({ours!r}); was it edited?"
                )


# What to_record derives from the result (each checked where a record gives it).
DERIVED_KEYS = ("case_key", "global_batch_size", "different_work", "throughput")


def _check_estimates(measurement: Measurement) -> None:
    """Refuse a measurement whose figures are not its blocks' own: each run's median is
    its blocks' median (what the `median` reading compares), the case's samples are its
    runs' blocks, and its step time and figures are their estimate over the runs (what
    tables, ratios against a baseline and the stored medians show). An edited estimate
    would show one speed beside verdicts read from another."""
    from fwbench.measure import runs as case_runs
    from fwbench.measure import stats

    def same(given: float, ours: float) -> bool:
        return math.isclose(given, ours, rel_tol=1e-9)

    runs = measurement.runs
    if not runs:  # recorded before runs (version 6): its one process's figures alone
        return
    for run in runs:
        values = {"": (run.median_s, run.samples)} | {
            f" {name}": (fig.median_s, fig.samples) for name, fig in run.figures.items()
        }
        for name, (given, samples) in values.items():
            if not same(given, stats.median(samples)):
                raise ValueError(
                    f"runs[{run.index}]{name} median_s: {given:.6g} is not the median of its "
                    f"blocks ({stats.median(samples):.6g}); was it edited?"
                )
    if measurement.samples != tuple(s for run in runs for s in run.samples):
        raise ValueError("samples: not its runs' blocks in order; was it edited?")
    # Every figure that each run has is estimated (launch.records.measurement_of).
    names = set.intersection(*(set(run.figures) for run in runs))
    if set(measurement.figures) != names:
        raise ValueError(
            f"figures: {sorted(measurement.figures)} are not its runs' ({sorted(names)}); "
            "was it edited?"
        )
    estimates = {STEP_TIME.name: (measurement.step_time_s, case_runs.estimate(runs))} | {
        name: (figure, case_runs.figure_estimate([run.figures[name].samples for run in runs]))
        for name, figure in measurement.figures.items()
    }
    for name, (shown, found) in estimates.items():
        if not all(
            same(a, b)
            for a, b in zip(
                (shown.median, shown.ci_low, shown.ci_high),
                (found.median_s, found.ci_low_s, found.ci_high_s),
                strict=True,
            )
        ):
            raise ValueError(
                f"{name}: {shown.median:.6g} (interval {shown.ci_low:.6g} to "
                f"{shown.ci_high:.6g}) is not its runs' estimate ({found.median_s:.6g}, "
                f"{found.ci_low_s:.6g} to {found.ci_high_s:.6g}); was it edited?"
            )


def _check_keys(record: dict[str, Any], version: int) -> None:
    """Refuse a record with a key no fwbench writes, or without one its version always
    writes: either would be read silently as another record (`runs` renamed, a record
    of one value a side; `reading` gone, verdicts read on another estimator)."""
    # The result's fields, the case's and the measurement's flat beside them, and what is
    # derived from them; older records' other names (run_id, timing_config, a serving
    # point's flat fields) were read into these before.
    allowed = (
        (Result.model_fields.keys() - {"case", "measurement"})
        | Case.record_keys()
        | Measurement.model_fields.keys()
        | set(DERIVED_KEYS)
    )
    unknown = sorted(set(record) - allowed)
    if unknown:
        raise ValueError(f"{unknown[0]}: not a field of any record fwbench writes; was it edited?")
    needed = ["runs"] if version >= RUNS_SINCE and record.get("step_time_s") else []
    if version >= SETTINGS_SINCE and "serving" not in record:  # a point's had none
        needed += ["run_timing", "run_plan", "reading"]
    missing = [key for key in needed if key not in record]
    if missing:
        raise ValueError(
            f"{missing[0]}: missing, and every version-{version} record has it; was it edited?"
        )
    # A null would be read as the field's default (reading null: verdicts on the median;
    # case_key null: an edited case unchecked), and fwbench writes none of these null.
    always = ("runs", "run_timing", "run_plan", "reading", "case_key", "global_batch_size")
    nulls = [k for k in (*always, "different_work") if k in record and record[k] is None]
    if nulls:
        raise ValueError(f"{nulls[0]}: null, and fwbench never writes it so; was it edited?")
