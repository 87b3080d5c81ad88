"""What several commands share: the consoles and their messages, and flags made into
settings and cases (the options themselves are cli/options.py; the tables they print,
fwbench.report.terminal)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from fwbench import user_models
from fwbench.case import Case
from fwbench.errors import FwbenchError, SpecError
from fwbench.measure.settings import PARTS, TimingConfig
from fwbench.report.plain import escape
from fwbench.tasks import get_task
from fwbench.tasks.train import TRAIN


def _console(stderr: bool) -> Console:
    # User text is printed as it was written: rich would turn `:name:` into an emoji
    # (hf:llama's ":llama" is one, so is a path holding ":smile:"); markup is escaped.
    # Logs and CI are not terminals; rich would squeeze tables into 80 columns there.
    probe = Console(stderr=stderr, emoji=False)
    return probe if probe.is_terminal else Console(stderr=stderr, width=160, emoji=False)


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


# The databases the command stores results in (what an interruption keeps is said
# only by a command that stores: `models` or `--help` keep nothing).
_storing: list[Path] = []


def storing(db: Path) -> None:
    """The command stores results into `db` from now on (execute, serve)."""
    _storing.append(db)


def stores() -> bool | None:
    """Whether results the command stored are kept: None for a command that stores
    none; False where it started storing but left no database (one it made and stored
    nothing in is removed when it stops: execute.removed_if_empty)."""
    return any(db.exists() for db in _storing) if _storing else None


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


def invocation_of(invocation: str | None, run: str | None) -> str | None:
    """The invocation id asked for by --invocation or by its old name, --run."""
    if invocation is not None and run is not None and invocation != run:
        raise SpecError(f"--run is the old name of --invocation: give one ({run} or {invocation})")
    return invocation if invocation is not None else run


# A case's batch where neither --batch-size nor a model's inputs fix one.
DEFAULT_BATCH_SIZE = 32


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
    require_idle: bool | None = None,
    compile_cache: bool | None = None,
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
        "require_idle": require_idle,
        "compile_cache": compile_cache,
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
    """One validated case per framework: one mode (strategy, options) for all, or one each
    (several for a single framework: one case in each).
    A user's model is prepared first (user_models.prepare: its inputs read from it or
    given by `input_shape`); its batch may be fixed by its inputs."""
    prepared = user_models.prepare(str(workload["model"]), input_shape or [], objective)
    task = get_task(str(workload.get("task") or TRAIN.name))
    if task.trains and prepared.described.get("params") == 0:
        raise SpecError(
            f"task {task.name}: {prepared.spec.name} has no trainable parameters, so there "
            "is nothing to train; measure --task infer"
        )
    workload = {**workload, **prepared.fields}
    workload["batch_size"] = user_models.batch_size(
        prepared, workload.get("batch_size"), DEFAULT_BATCH_SIZE
    )
    given_options = options or []
    # One framework in several modes (or options, strategies): a variant of each, as
    # `--framework flax --mode jit --mode nnx-jit` reads.
    several = {len(g) for g in (modes, strategies or [], given_options) if len(g) > 1}
    if len(frameworks) == 1 and len(several) == 1:
        frameworks = frameworks * several.pop()
    for name, given in (
        ("mode", modes),
        ("strategy", strategies or []),
        ("options", given_options),
    ):
        if len(given) not in (0, 1, len(frameworks)):
            raise SpecError(
                f"{name}: give one {name} for all frameworks, one per framework "
                f"({len(frameworks)}), or several for one framework; not {len(given)}"
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
