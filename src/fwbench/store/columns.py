"""The results table's columns, declared once: name, SQL type and the value a Result
stores there.

Rows are written from this list (`row`), the CSV and Parquet exports select these
columns in this order, and a test checks that a database made by the migrations
(fwbench.store.schema) has exactly these columns, so the table, its exports and this
map cannot drift apart. JSON is the record's own nested form (`Result.to_record`);
each column is either a key of that record or a part of one (`step_time_s` is stored as
median_s / ci_low_s / ci_high_s), or a flat copy made for SQL users (`derived`: never
read back; the record holds the value), and the same test checks that correspondence.
The order is the table's: columns of later schema versions come after earlier ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from fwbench.case import Case
from fwbench.explain.breakdown import Breakdown
from fwbench.measure.energy import Energy
from fwbench.measure.runs import RunPlan
from fwbench.measure.timing import RunTiming
from fwbench.measure.verdicts import Reading
from fwbench.models.parity import Parity
from fwbench.result import Distributed, Memory, Result, Work

# How a column reads back into a Result (fwbench.store.db._from_row): a case field, a
# field of the measurement, a dict stored as JSON, a typed part stored as JSON, or
# something read its own way ("own"; derived columns are not read back).
Kind = Literal["case", "measured", "json", "model", "own"]


@dataclass(frozen=True)
class Column:
    name: str
    sql: str
    value: Callable[[Result], Any]
    kind: Kind = "own"
    model: type[BaseModel] | None = None  # kind "model": what the JSON text validates as
    # A flat copy of part of the record for SQL queries; the record keeps the value.
    derived: bool = False
    # The record key this column stores a part of (step_time_s's statistics).
    part_of: str | None = None


def _case(name: str, sql: str) -> Column:
    return Column(name, sql, lambda r: getattr(r.case, name), "case")


def _dimension(name: str) -> Column:
    """A dimension that had a column of its own before the case's dimensions were one
    mapping (`dims`, schema 19): a flat copy of it for SQL users, NULL for a case whose
    model does not take it. A dimension declared since has no column: `dims` holds it."""
    return Column(name, "INTEGER", lambda r: r.case.dims.get(name), derived=True)


def _json(name: str) -> Column:
    """A dict of the record, as JSON text."""
    return Column(name, "VARCHAR", lambda r: json.dumps(getattr(r, name)), "json")


def _model(name: str, model: type[BaseModel]) -> Column:
    """A typed part of the record (a pydantic model), as JSON text; NULL when absent."""

    def value(r: Result) -> str | None:
        found = getattr(r, name)
        return found.model_dump_json() if found is not None else None

    return Column(name, "VARCHAR", value, "model", model)


def _measured(name: str, sql: str) -> Column:
    return Column(
        name, sql, lambda r: getattr(r.measurement, name) if r.measurement else None, "measured"
    )


def _step_time(name: str, field: str) -> Column:
    def value(r: Result) -> float | None:
        m = r.measurement
        return getattr(m.step_time_s, field) if m else None

    return Column(name, "DOUBLE", value, part_of="step_time_s")


def _device_peak(memory: Memory | None) -> int | None:
    if memory is None or not memory.device:
        return None
    peak: int | None = memory.device.get("allocated_peak_bytes")
    return peak


RESULT_COLUMNS: tuple[Column, ...] = (
    # version 1
    Column("result_id", "VARCHAR", lambda r: r.result_id),
    Column("invocation_id", "VARCHAR", lambda r: r.invocation_id),
    Column("case_key", "VARCHAR", lambda r: r.case_key),
    Column("recorded_at", "TIMESTAMP", lambda r: r.recorded_at),
    Column("schema_version", "INTEGER", lambda r: r.schema_version),
    _case("framework", "VARCHAR"),
    _case("model", "VARCHAR"),
    _case("task", "VARCHAR"),
    _case("batch_size", "INTEGER"),
    _dimension("input_size"),
    _dimension("num_classes"),
    _case("device", "VARCHAR"),
    _case("mode", "VARCHAR"),
    _case("threads", "INTEGER"),
    Column("status", "VARCHAR", lambda r: r.status),
    Column("error", "VARCHAR", lambda r: r.error),
    _step_time("median_s", "median"),
    _step_time("ci_low_s", "ci_low"),
    _step_time("ci_high_s", "ci_high"),
    Column("throughput", "DOUBLE", lambda r: r.throughput),
    Column("samples", "DOUBLE[]", lambda r: list(r.measurement.samples) if r.measurement else []),
    _measured("steps_per_block", "INTEGER"),
    _measured("build_s", "DOUBLE"),
    _measured("first_step_s", "DOUBLE"),
    _measured("warmup_steps", "INTEGER"),
    _measured("warmup_s", "DOUBLE"),
    _measured("warmup_stop", "VARCHAR"),
    _measured("stop_reason", "VARCHAR"),
    _measured("sync_overhead_s", "DOUBLE"),
    Column("param_count", "BIGINT", lambda r: r.param_count),
    _model("parity", Parity),
    Column("different_work", "BOOLEAN", lambda r: r.different_work),
    Column("warnings", "VARCHAR[]", lambda r: list(r.warnings)),
    _json("environment"),
    _json("settings"),
    # version 2
    _model("memory", Memory),
    _model("energy", Energy),
    _model("work", Work),
    Column(
        "host_peak_bytes",
        "BIGINT",
        lambda r: r.memory.host_peak_bytes if r.memory else None,
        derived=True,
    ),
    Column("device_peak_bytes", "BIGINT", lambda r: _device_peak(r.memory), derived=True),
    Column(
        "joules_per_sample",
        "DOUBLE",
        lambda r: r.energy.joules_per_sample if r.energy else None,
        derived=True,
    ),
    Column(
        "flops_per_step",
        "DOUBLE",
        lambda r: r.work.flops_per_step if r.work else None,
        derived=True,
    ),
    Column(
        "achieved_flops",
        "DOUBLE",
        lambda r: r.work.achieved_flops_per_s if r.work else None,
        derived=True,
    ),
    # version 3
    _model("breakdown", Breakdown),
    # version 4
    _dimension("seq_len"),
    _dimension("vocab_size"),
    _dimension("freq_bins"),
    # version 5
    _case("precision", "VARCHAR"),
    _case("layout", "VARCHAR"),
    _case("autotune", "BOOLEAN"),
    # version 6
    _case("strategy", "VARCHAR"),
    _case("world_size", "INTEGER"),
    Column("global_batch_size", "INTEGER", lambda r: r.case.global_batch_size),
    Column("comm_s", "DOUBLE", lambda r: r.communication_s, derived=True),
    _model("distributed", Distributed),
    # version 7
    Column(
        "runs",
        "VARCHAR",
        lambda r: (
            json.dumps([run.model_dump() for run in r.measurement.runs]) if r.measurement else None
        ),
    ),
    Column(
        "n_runs",
        "INTEGER",
        lambda r: len(r.measurement.per_run()) if r.measurement else None,
        derived=True,
    ),
    _measured("ci_method", "VARCHAR"),
    # version 9
    _json("tracked"),
    # version 10
    _case("options", "VARCHAR"),
    # version 12
    _case("task_dims", "VARCHAR"),
    # version 13
    Column(
        "figures",
        "VARCHAR",
        lambda r: (
            json.dumps({k: v.model_dump() for k, v in r.measurement.figures.items()})
            if r.measurement
            else None
        ),
    ),
    # version 14
    _measured("group_id", "VARCHAR"),
    # version 16
    _case("model_path", "VARCHAR"),
    _case("inputs", "VARCHAR"),
    _case("objective", "VARCHAR"),
    # version 17 (in place of version 1's timing_config)
    _model("run_timing", RunTiming),
    _model("run_plan", RunPlan),
    _model("reading", Reading),
    # version 19 (the dimensions above are flat copies of it from then on)
    Column("dims", "VARCHAR", lambda r: json.dumps(r.case.dims), "case"),
)

# Every case field has its column (a new case field needs one, and a migration).
assert set(Case.model_fields) <= {c.name for c in RESULT_COLUMNS}, "a case field lacks a column"


def row(r: Result) -> dict[str, Any]:
    """The result's row of the results table."""
    return {c.name: c.value(r) for c in RESULT_COLUMNS}


def names() -> list[str]:
    return [c.name for c in RESULT_COLUMNS]


def of_kind(kind: Kind) -> list[Column]:
    return [c for c in RESULT_COLUMNS if c.kind == kind]


# What DuckDB's integer types hold: a value outside is refused at INSERT, after the file
# was opened; a record is checked against them before anything is written.
_INTEGER_RANGE = {"INTEGER": 1 << 31, "BIGINT": 1 << 63}


def out_of_range(values: dict[str, Any]) -> str | None:
    """The first column of a row (`row`) whose integer does not fit its SQL type, as
    "NAME: why", or None."""
    for c in RESULT_COLUMNS:
        bound = _INTEGER_RANGE.get(c.sql)
        value = values.get(c.name)
        if bound is not None and isinstance(value, int) and not -bound <= value < bound:
            return f"{c.name}: {value} is out of range (a {c.sql} column holds up to {bound - 1})"
    return None
