"""What several commands share: consoles, common options, result rendering."""

from __future__ import annotations

import json
import re
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from fwbench import user_models
from fwbench.case import Case
from fwbench.cli import choices
from fwbench.errors import FwbenchError, SpecError
from fwbench.measure.settings import PARTS, TimingConfig
from fwbench.measure.verdicts import DEFAULT_BAND, percent
from fwbench.report import generation, scaling
from fwbench.report.serving import Table as ReportTable
from fwbench.report.summary import (
    estimator_of,
    summarise,
    verdict_notes,
    workload_cells,
    workload_head,
)
from fwbench.result import Result
from fwbench.store.db import DEFAULT_DB
from fwbench.tasks import STEP_TIME, find_task


def _console(stderr: bool) -> Console:
    # Logs and CI are not terminals; rich would squeeze tables into 80 columns there.
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=160)


# Human output goes to stderr so that stdout stays clean for --json.
console = _console(stderr=True)
out = _console(stderr=False)


def warn(text: str) -> None:
    """A warning on stderr, one line (a damaged row left out, a model no plugin registers)."""
    # One line, however long: a log reader greps it whole.
    console.print(f"[yellow]warning:[/yellow] {escape(text)}", highlight=False, soft_wrap=True)


def note(text: str) -> None:
    """A line on stderr about what the output is read from (a snapshot of a busy file)."""
    console.print(f"note: {escape(text)}", highlight=False)


# Errors a command met while it ran that must not cost its output: raised once the
# command has printed what it has (cli/app.py's result callback), as one line, exit 2.
_deferred: list[FwbenchError] = []


def defer(error: FwbenchError) -> None:
    """Raise `error` after the command's output (a result kept outside its database)."""
    _deferred.append(error)


# Whether the command has started storing results (what an interruption keeps is said
# only by a command that stores: `models` or `--help` keep nothing).
_storing: list[bool] = []


def storing() -> None:
    """The command stores results from now on (execute, serve)."""
    _storing.append(True)


def stores() -> bool:
    return bool(_storing)


def raise_deferred() -> None:
    """The first deferred error, if any (each is raised once)."""
    if _deferred:
        error = _deferred[0]
        _deferred.clear()
        raise error


def take_deferred() -> list[FwbenchError]:
    """The deferred errors not raised yet (a later error ended the command first)."""
    errors = list(_deferred)
    _deferred.clear()
    return errors


InputShapeOption = Annotated[
    list[str] | None,
    typer.Option(
        help="A model of your own: an input's shape, [NAME=]1x3x224x224[:dtype] (the leading "
        "dimension is the batch: B takes --batch-size); repeat for several inputs. "
        "[default: what the model declares]"
    ),
]
ObjectiveOption = Annotated[
    str | None,
    typer.Option(
        help="A model of your own: what training minimises: mean (of its outputs, a "
        "synthetic loss), classify (cross-entropy of batch x classes logits) or lm "
        "(cross-entropy at every position). [default: mean; lm for a causal transformer]"
    ),
]
BatchSizeOption = Annotated[
    int | None,
    typer.Option(help="Samples per step. [default: 32, or the batch a model's inputs fix]"),
]
DEFAULT_BATCH_SIZE = 32
DbOption = Annotated[Path, typer.Option("--db", help="Results file (DuckDB).", show_default=True)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")]
InvocationOption = Annotated[
    str | None,
    typer.Option(
        "--invocation",
        help="Only the results of this invocation (the id of the command that recorded "
        "them: the first column of `fwbench results`).",
    ),
]
# --invocation's name before "run" came to mean a worker process only; still accepted.
RunAliasOption = Annotated[str | None, typer.Option("--run", hidden=True)]


def invocation_of(invocation: str | None, run: str | None) -> str | None:
    """The invocation id asked for by --invocation or by its old name, --run."""
    if invocation is not None and run is not None and invocation != run:
        raise SpecError(f"--run is the old name of --invocation: give one ({run} or {invocation})")
    return invocation if invocation is not None else run


BudgetOption = Annotated[
    str | None,
    typer.Option(
        help="Wall-clock time for the whole measurement, e.g. 5m: each workload gets an "
        "equal share of what is left (time a decided one does not use goes to the next) "
        "and stops adding runs beyond its minimum once the share is spent."
    ),
]
DEFAULT_DB_PATH = DEFAULT_DB

# The timing flags, declared once: `run` sets them over TimingConfig's defaults, `sweep`
# over its file's `timing:` (timing_flags). Left out (None), a flag changes nothing; the
# defaults shown are TimingConfig's, which a sweep file's `timing` may change.
_TIMING_DEFAULTS = TimingConfig()
TargetCiOption = Annotated[
    float | None,
    typer.Option(
        help="Stop adding runs when the case's 95% CI is within +-this share. "
        f"[default: {_TIMING_DEFAULTS.plan.target_ci:g}]"
    ),
]
MaxTimeOption = Annotated[
    float | None,
    typer.Option(
        help="Seconds of timed blocks per case, over all its runs, at most. "
        f"[default: {_TIMING_DEFAULTS.plan.max_time_s:g}]"
    ),
]
MinRunsOption = Annotated[
    int | None,
    typer.Option(
        help="Worker processes per case at least; 1 gives an interval that excludes the "
        f"variation between processes. [default: {_TIMING_DEFAULTS.plan.min_runs}]"
    ),
]
MaxRunsOption = Annotated[
    int | None,
    typer.Option(
        help="Worker processes per case at most. "
        f"[default: {_TIMING_DEFAULTS.plan.max_runs}, or --min-runs if higher]"
    ),
]
EstimatorOption = Annotated[
    str | None,
    typer.Option(
        help="Each run's value that verdicts read: median, p25, p10 or min of its timed "
        "blocks (docs/methodology.md); the tables show the times it reads. "
        f"[default: {_TIMING_DEFAULTS.reading.estimator}]"
    ),
]
# The equivalence band, declared once for every command that makes verdicts: `run` and
# `sweep` record it with each result; `compare`, `report` and `tune` read verdicts
# under it instead of the band the results were recorded with.
BandOption = Annotated[
    str | None,
    typer.Option(
        help="Equivalence band: variants within +-this of each other are 'the same', e.g. "
        f"5% or 0.05. [default: {percent(DEFAULT_BAND)}, or what the results recorded]"
    ),
]
RequireIdleOption = Annotated[
    bool,
    typer.Option(help="Wait (30 s) for other processes to go quiet before each run, or refuse."),
]

CompileCacheOption = Annotated[
    bool,
    typer.Option(
        help="Keep what JAX and torch.compile compile in the user's cache, by host and "
        "framework version, so a program is compiled once, not in every run of every "
        "command (each result says whether its compiles hit the cache); "
        "--no-compile-cache compiles in every run (a cold start each time)."
    ),
]

# A model's dimensions; each model takes some of them (see `fwbench models`), and one left
# out takes the model's default.
InputSizeOption = Annotated[
    int | None, typer.Option(help="Image side in pixels (image models). [default: the model's]")
]
SeqLenOption = Annotated[
    int | None,
    typer.Option(help="Tokens per sequence, or spectrogram frames. [default: the model's]"),
]
VocabSizeOption = Annotated[
    int | None, typer.Option(help="Vocabulary size (token models). [default: the model's]")
]
FreqBinsOption = Annotated[
    int | None, typer.Option(help="Frequency bins (spectrogram models). [default: the model's]")
]
PrecisionOption = Annotated[
    str | None,
    typer.Option(help=choices.PRECISION_HELP, autocompletion=choices.complete_precision),
]
LayoutOption = Annotated[
    str | None,
    typer.Option(help=choices.LAYOUT_HELP, autocompletion=choices.complete_layout),
]
FrameworksOption = Annotated[
    list[str],
    typer.Option(help=choices.frameworks_help(), autocompletion=choices.complete_framework),
]
ModelOption = Annotated[
    str,
    typer.Option(help="Model name; see `fwbench models`.", autocompletion=choices.complete_model),
]
TaskOption = Annotated[
    str, typer.Option(help=choices.TASK_HELP, autocompletion=choices.complete_task)
]
DeviceOption = Annotated[
    str, typer.Option(help=choices.DEVICE_HELP, autocompletion=choices.complete_device)
]
ModesOption = Annotated[
    list[str] | None,
    typer.Option(help=choices.modes_help(), autocompletion=choices.complete_mode),
]
OptionsOption = Annotated[list[str] | None, typer.Option("--options", help=choices.options_help())]
TaskDimsOption = Annotated[
    str | None,
    typer.Option(help=choices.task_dims_help(), autocompletion=choices.complete_task_dims),
]
AutotuneOption = Annotated[
    bool, typer.Option(help="cuDNN algorithm search (cudnn.benchmark; cuda only).")
]
NumClassesOption = Annotated[
    int | None, typer.Option(help="Output classes (classifiers, CTC). [default: the model's]")
]


def timing_config(flags: dict[str, str] | None = None, **fields: Any) -> TimingConfig:
    """A TimingConfig from flat settings given by flags, or a one-line error naming the
    flag and its range.

    `flags` names the flag of a field where it is not the field's name as a flag
    (max_time_s is --max-time)."""

    def flag(field: str) -> str:
        return (flags or {}).get(field) or "--" + field.removesuffix("_s").replace("_", "-")

    try:
        return TimingConfig(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        msg = str(err["msg"]).removeprefix("Value error, ")
        loc = [str(part) for part in err["loc"] if str(part) not in PARTS]
        if not loc:
            # A rule between fields ("max_runs (2) is below min_runs (5)"): name the flags.
            for field in sorted(fields, key=len, reverse=True):
                msg = re.sub(rf"\b{field}\b", flag(field), msg)
            raise SpecError(msg) from None
        raise SpecError(f"{flag(loc[-1])}: {msg} (got {err.get('input')!r})") from None


def timing_flags(
    base: TimingConfig,
    *,
    target_ci: float | None = None,
    max_time: float | None = None,
    min_runs: int | None = None,
    max_runs: int | None = None,
    estimator: str | None = None,
    band: str | None = None,
    require_idle: bool = False,
    compile_cache: bool = True,
) -> TimingConfig:
    """`base` with the timing flags that were given; a one-line error naming a flag out
    of range. --max-runs left out rises to --min-runs; given below it, it is refused."""
    given: dict[str, Any] = {
        "target_ci": target_ci,
        "max_time_s": max_time,
        "min_runs": min_runs,
        "max_runs": max_runs,
        "estimator": estimator,
        "band": band,
        "require_idle": require_idle or None,
        "compile_cache": None if compile_cache else False,
    }
    given = {k: v for k, v in given.items() if v is not None}
    if min_runs is not None and max_runs is None:
        given["max_runs"] = max(base.plan.max_runs, min_runs)
    if not given:
        return base
    # Only the given fields are named in an error, so a rule broken by the base alone
    # (a sweep file's own timing) is not blamed on a flag.
    fields = {k: v for k, v in base.flat().items() if k not in given} | given
    return timing_config(None, **fields)


def band_flag(band: str | None) -> float | None:
    """--band of a command that reads stored results (None: as they were recorded), or
    a one-line error."""
    if band is None:
        return None
    return timing_config(None, band=band).reading.band


def cases_per_framework(
    frameworks: list[str],
    modes: Sequence[str | None],
    strategies: list[str] | None = None,
    options: list[str] | None = None,
    input_shape: list[str] | None = None,
    objective: str | None = None,
    **workload: Any,
) -> list[Case]:
    """One validated case per framework: one mode (strategy, options) for all, or one each.
    A user's model is prepared first (user_models.prepare: its inputs read from it or
    given by `input_shape`); its batch may be fixed by its inputs."""
    prepared = user_models.prepare(str(workload["model"]), input_shape or [], objective)
    workload = {**workload, **prepared.fields}
    workload["batch_size"] = user_models.batch_size(
        prepared, workload.get("batch_size"), DEFAULT_BATCH_SIZE
    )
    given_options = options or []
    for name, given in (
        ("mode", modes),
        ("strategy", strategies or []),
        ("options", given_options),
    ):
        if len(given) not in (0, 1, len(frameworks)):
            raise SpecError(
                f"{name}: give one {name} for all frameworks or one per framework "
                f"({len(frameworks)}), not {len(given)}"
            )
    # Left out, threads default per case: the cores, shared by a case's processes.
    if not workload.get("threads"):
        workload.pop("threads", None)
    return [
        Case.build(
            framework=fw,
            # None: the framework's default mode (fwbench.case.default_mode).
            mode=_pick(modes, i) if modes else None,
            **({"strategy": _pick(strategies, i)} if strategies else {}),
            **({"options": _pick(given_options, i)} if given_options else {}),
            **workload,
        )
        for i, fw in enumerate(frameworks)
    ]


def _pick(values: Sequence[str | None], i: int) -> str | None:
    return values[0] if len(values) == 1 else values[i]


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def summary_table(
    results: list[Result], title: str = "Summary", band: float | None = None
) -> Table:
    """The verdict table: a row per workload, each variant's figure as its verdict reads
    it (`band`: the band verdicts read instead of the recorded one)."""
    variants, rows = summarise(results, band)
    notes = verdict_notes(rows)
    table = Table(
        title=title,
        title_justify="left",
        # Our words hold brackets ("[eager vs compiled]"): text, not Rich markup.
        caption=escape("\n".join(notes)) or None,
        caption_justify="left",
    )
    head = workload_head(rows)
    for col in head:
        table.add_column(col)
    # The value every cell reads (each run's p25...), where the rows agree; else the note
    # under the table says which.
    estimator = estimator_of(rows)
    unit = f"{estimator} ms" if estimator else "ms"
    for v in variants:
        table.add_column(f"{v}\n{unit} ±95%CI x", justify="right")
    table.add_column("verdict")
    for row in rows:
        style = "yellow" if row.different_work else None
        table.add_row(
            *workload_cells(row, head),
            *(row.cell(v, short=True) for v in variants),
            escape(row.verdict(short=True)),
            style=style,
        )
    return table


def scaling_table(results: list[Result]) -> Table:
    head, body = scaling.rows(scaling.scaling(results))
    table = Table(title="Data-parallel scaling (efficiency = t1 / tN)", title_justify="left")
    for col in head:
        table.add_column(col)
    for row in body:
        table.add_row(*row)
    return table


def describe_result(r: Result) -> str:
    lines = [f"[bold]{r.case.label()}[/bold]  status: [bold]{r.status}[/bold]"]
    if r.error:
        lines.append(f"  error: {r.error}")
    m = r.measurement
    if m is not None:
        st = m.step_time_s
        runs = " ".join(f"{x * 1e3:.3f}" for x in m.per_run())
        lines += [
            f"  median step time: {st.median * 1e3:.3f} ms (95% CI {st.ci_low * 1e3:.3f}-"
            f"{st.ci_high * 1e3:.3f}: {m.ci_method}), stopped by {m.stop_reason}",
            f"  runs (medians, ms): {runs}; {len(m.samples)} blocks in all",
            *read_lines(r),
            *figure_lines(r),
            f"  throughput: {r.throughput:.1f} {unit_of(r)}/s",
            f"  build {m.build_s:.2f} s, first step {m.first_step_s * 1e3:.1f} ms, "
            f"warmup {m.warmup_steps} steps ({m.warmup_stop})",
        ]
    if r.memory is not None:
        mem = r.memory
        text = (
            f"  host memory: peak {mem.host_peak_bytes / 2**20:,.0f} MiB, of which "
            f"{mem.host_framework_bytes / 2**20:,.0f} MiB above the post-import baseline"
        )
        if mem.device:
            text += ", device " + ", ".join(
                f"{k} {v / 2**20:,.0f} MiB" for k, v in mem.device.items()
            )
        lines.append(text)
    if r.energy is not None:
        e = r.energy
        if e.status == "measured" and e.joules_per_sample is not None:
            lines.append(
                f"  energy: {e.joules_per_sample:.4g} J/sample, {e.average_power_w:.1f} W "
                f"average ({e.source})"
            )
        else:
            lines.append(f"  energy: unavailable ({e.reason})")
    flops = r.work.flops_per_step if r.work is not None else None
    if r.work is not None and flops:
        w = r.work
        text = f"  work: {flops / 1e9:.3g} GFLOP/step"
        if w.achieved_flops_per_s:
            text += f", {w.achieved_flops_per_s / 1e9:.1f} GFLOP/s achieved"
        if w.share_of_peak is not None:
            text += f" = {w.share_of_peak:.0%} of the measured peak"
        lines.append(text)
    if r.distributed is not None:
        d = r.distributed
        lines.append(
            f"  data parallel: {d.strategy_label}, {d.replicas} replica(s) in {d.processes} "
            f"process(es), batch {d.per_replica_batch_size}/replica = {d.global_batch_size} "
            f"global, {d.threads_per_process} thread(s)/process, backend {d.backend}"
        )
        comm = d.communication
        if comm is not None and comm.in_flight_s is not None and comm.share_of_step is not None:
            lines.append(
                f"  communication: {comm.in_flight_s * 1e3:.1f} ms/step in flight "
                f"({comm.share_of_step:.0%} of a profiled step; {', '.join(comm.ops)})"
            )
        elif comm is not None:
            lines.append(f"  communication: not measured ({comm.error})")
    if r.parity is not None:
        lines.append(f"  {r.parity.describe()}")
    lines += [f"  [yellow]warning:[/yellow] {w}" for w in r.warnings]
    return "\n".join(lines)


def read_lines(r: Result) -> list[str]:
    """What its verdicts read of each run, where it is not the median: the value per run
    and, as the tables show it, their geometric mean."""
    m, estimator = r.measurement, r.reading.estimator
    if m is None or estimator == "median" or r.verdict_figure != STEP_TIME.name:
        return []
    values = m.per_run(estimator)
    runs = " ".join(f"{x * 1e3:.3f}" for x in values)
    mean = statistics.geometric_mean(values)
    return [f"  runs ({estimator}, ms; what its verdicts read): {runs}; {mean * 1e3:.3f} over runs"]


def unit_of(r: Result) -> str:
    """What its throughput counts: its task's unit (samples; a generation's tokens)."""
    task = find_task(r.case.task)
    return task.unit if task is not None else "samples"


def figure_lines(r: Result) -> list[str]:
    """Its task's own figures, each with its interval over runs (a generation's)."""
    m, task = r.measurement, find_task(r.case.task)
    if m is None or task is None:
        return []
    lines = []
    for figure in task.figures:
        if figure.name in m.figures:
            f = m.figures[figure.name]
            mark = "  (its verdicts read it)" if figure.name == r.verdict_figure else ""
            what = f" ({figure.what})" if figure.what else ""
            lines.append(
                f"  {figure.label}{what}: {f.median * 1e3:.3f} ms "
                f"(95% CI {f.ci_low * 1e3:.3f}-{f.ci_high * 1e3:.3f}){mark}"
            )
    # Which of a generation's times per token is the time per token, where they differ.
    if (why := generation.skew(r)) is not None:
        lines.append(f"  {why}")
    return lines


def report_tables(results: Sequence[Result]) -> list[Table]:
    """The report's tables that the summary does not hold (a generation's TTFT and TPOT
    with their verdicts), for a terminal."""
    return [rich_table(t) for t in generation.tables(results)]


def rich_table(t: ReportTable) -> Table:
    """A report's table (report.serving.Table) as a terminal table, its note below."""
    # Cells hold our bracketed marks ("[eager vs compiled]"): text, not Rich markup.
    table = Table(
        title=t.heading, title_justify="left", caption=escape(t.note), caption_justify="left"
    )
    for name in t.head:
        table.add_column(name)
    for row in t.rows:
        table.add_row(*(escape(c) for c in row))
    return table


def progress_bar(eta: bool = True) -> Progress:
    """The progress bar of long commands (sweeps, serving), on stderr's console."""
    columns = [
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(),
    ]  # fmt: skip
    if eta:
        columns += [TextColumn("eta"), TimeRemainingColumn()]
    # A redraw costs CPU that the worker being measured would otherwise have.
    return Progress(*columns, console=console, transient=False, refresh_per_second=2)
