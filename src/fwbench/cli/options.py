"""Every option of the commands, declared once: its type, flag, help and completion.

A command's signature is built from these when `fwbench --help` or any command starts,
so this module imports only what the help texts read (the registries through
`cli.choices`, the measurement settings' defaults): the work a command does is imported
by the command when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fwbench.cli import choices
from fwbench.launch import DEFAULT_TIMEOUT_S
from fwbench.measure.settings import TimingConfig
from fwbench.measure.verdicts import DEFAULT_BAND, percent
from fwbench.store import DEFAULT_DB

__all__ = ["DEFAULT_DB", "DEFAULT_TIMEOUT_S"]

# --- the results file and what is printed ---------------------------------------------

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
ReportOption = Annotated[
    list[Path] | None,
    typer.Option(help="Also write a report here (.html or .md; repeat)."),
]

# --- the case: which model, task and framework, and its dimensions --------------------

FrameworksOption = Annotated[
    list[str],
    typer.Option(help=choices.frameworks_help(), autocompletion=choices.complete_framework),
]
# `explain` and `tune`: the frameworks are optional, the core ones by default.
CoreFrameworksOption = Annotated[
    list[str] | None,
    typer.Option(
        help=choices.frameworks_help(f"repeat. [default: {choices.CORE_HELP}]"),
        autocompletion=choices.complete_framework,
    ),
]
ModelOption = Annotated[
    str,
    typer.Option(help="Model name; see `fwbench models`.", autocompletion=choices.complete_model),
]
TaskOption = Annotated[
    str, typer.Option(help=choices.TASK_HELP, autocompletion=choices.complete_task)
]
TaskDimsOption = Annotated[
    str | None,
    typer.Option(help=choices.task_dims_help(), autocompletion=choices.complete_task_dims),
]
DeviceOption = Annotated[
    str, typer.Option(help=choices.DEVICE_HELP, autocompletion=choices.complete_device)
]
ModesOption = Annotated[
    list[str] | None,
    typer.Option(help=choices.modes_help(), autocompletion=choices.complete_mode),
]
OptionsOption = Annotated[list[str] | None, typer.Option("--options", help=choices.options_help())]
PrecisionOption = Annotated[
    str | None,
    typer.Option(help=choices.PRECISION_HELP, autocompletion=choices.complete_precision),
]
LayoutOption = Annotated[
    str | None,
    typer.Option(help=choices.LAYOUT_HELP, autocompletion=choices.complete_layout),
]
AutotuneOption = Annotated[
    bool, typer.Option(help="cuDNN algorithm search (cudnn.benchmark; cuda only).")
]
# Left out (0), a case's threads are the physical cores, shared by its processes.
ThreadsOption = Annotated[
    int,
    typer.Option(
        help="Intra- and inter-op threads per process. "
        "[default: physical cores, shared by a case's processes]"
    ),
]
# tune's search axis: the thread counts it tries, where the others take one value.
ThreadCountsOption = Annotated[
    list[int] | None,
    typer.Option("--threads", help="Thread counts to try (repeat). [default: physical cores]"),
]
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
NumClassesOption = Annotated[
    int | None, typer.Option(help="Output classes (classifiers, CTC). [default: the model's]")
]
# Any dimension a model declares, the five above among them (they are its spellings).
DimOption = Annotated[
    list[str] | None,
    typer.Option(
        "--dim",
        help="A dimension of the model as NAME=VALUE (any it declares; `fwbench models` "
        "lists them; --input-size and the others above spell the common ones), or of the "
        "task (as --task-dims); repeat for several. [default: the model's]",
    ),
]

# --- how it is measured ---------------------------------------------------------------

# The timing flags: `run` sets them over TimingConfig's defaults, `sweep` over its file's
# `timing:` (cli.common.timing_flags). Left out (None), a flag changes nothing; the
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
# `explain` and `tune` give each case one run (tune confirms its finalists apart): the
# same flag, --max-time, names that run's length.
OneRunTimeOption = Annotated[
    float,
    typer.Option(
        "--max-time",
        help="Seconds of timed blocks in each case's one run (explain: unprofiled; tune: a "
        "candidate's screening run, and its finalists are confirmed over three times this).",
    ),
]
# The timing fields that --max-time (OneRunTimeOption) sets, by flag, for timing_config's
# errors to name it.
ONE_RUN_TIME_FLAGS = {"max_time_s": "--max-time", "run_time_s": "--max-time"}
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
# The equivalence band, for every command that makes verdicts: `run` and `sweep` record
# it with each result; `compare`, `report` and `tune` read verdicts under it instead of
# the band the results were recorded with.
BandOption = Annotated[
    str | None,
    typer.Option(
        help="Equivalence band: variants within +-this of each other are 'the same', e.g. "
        f"5% or 0.05. [default: {percent(DEFAULT_BAND)}, or what the results recorded]"
    ),
]
InterleaveOption = Annotated[
    bool,
    typer.Option(
        help="Alternate the framework/mode variants of each workload: their runs in time, "
        "their workers block by block."
    ),
]
RequireIdleOption = Annotated[
    bool | None,
    typer.Option(
        help="Wait (30 s) for other processes to go quiet before each run, or refuse "
        "[default: no, or the sweep file's timing]."
    ),
]
CompileCacheOption = Annotated[
    bool | None,
    typer.Option(
        help="Keep what JAX, torch.compile and TensorFlow's XLA mode compile in the user's "
        "cache, by host and framework version, so a program is compiled once, not in every "
        "run of every command (each result says whether its compiles hit the cache); "
        "--no-compile-cache compiles in every run (a cold start each time) [default: keep, "
        "or the sweep file's timing]."
    ),
]
BudgetOption = Annotated[
    str | None,
    typer.Option(
        help="Wall-clock time for the whole measurement, e.g. 5m: every workload measures "
        "its minimum runs first, then the time left goes a round at a time to the "
        "undecided one likeliest to be decided soonest, while a round still fits."
    ),
]
TimeoutOption = Annotated[
    float | None,
    typer.Option(
        help="Seconds a run (a worker process) may take before it is stopped. "
        f"[default: {DEFAULT_TIMEOUT_S:g}, or a sweep file's timeout_s]"
    ),
]
