"""`fwbench tune MODEL`: each framework's best configuration here, and what it changes."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fwbench.case import default_threads
from fwbench.catalog.frameworks import FRAMEWORKS, core_frameworks
from fwbench.cli import choices
from fwbench.cli.bundles import take, takes
from fwbench.cli.common import console, out, print_json, timing_config
from fwbench.cli.options import (
    DEFAULT_DB,
    ONE_RUN_TIME_FLAGS,
    BandOption,
    CoreFrameworksOption,
    DbOption,
    JsonOption,
    OneRunTimeOption,
    ThreadCountsOption,
    TimeoutOption,
)
from fwbench.cli.workload import Workload
from fwbench.errors import SpecError, positive_seconds
from fwbench.launch import DEFAULT_TIMEOUT_S

if TYPE_CHECKING:
    from fwbench import tune
    from fwbench.measure.verdicts import Verdict


# The workload but the axes tune searches, and a user's own model's inputs, which it does
# not read.
_SEARCHED = ("precision", "layout", "autotune", "threads")


@takes(
    workload=take(
        Workload,
        omit=("input_shape", "objective", *_SEARCHED),
        replace={"batch_size": (Annotated[int, typer.Option(help="Samples per step.")], 32)},
    )
)
def command(
    model: Annotated[str, typer.Argument(help="Model name; see `fwbench models`.")],
    framework: CoreFrameworksOption = None,
    workload: Workload = Workload(),
    mode: Annotated[
        list[str] | None,
        typer.Option(
            help=choices.tune_modes_help(),
            autocompletion=choices.complete_mode,
        ),
    ] = None,
    precision: Annotated[
        list[str] | None,
        typer.Option(
            help="Precisions to try (repeat). [default: fp32, bf16; GPUs add tf32, fp16]",
            autocompletion=choices.complete_precision,
        ),
    ] = None,
    threads: ThreadCountsOption = None,
    framework_options: Annotated[
        list[str] | None,
        typer.Option(
            "--options",
            help=choices.tune_options_help(),
        ),
    ] = None,
    max_time: OneRunTimeOption = 3.0,
    timeout: TimeoutOption = None,
    dry_run: Annotated[bool, typer.Option(help="List the candidates and stop.")] = False,
    band: BandOption = None,
    db: DbOption = DEFAULT_DB,
    json: JsonOption = False,
) -> None:
    """Search each framework's modes, precisions, layouts, threads and own settings for this
    workload;
    report each framework's best configuration and the best-vs-best verdict next to the
    default-vs-default one."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench import tune
    from fwbench.api import RunOptions
    from fwbench.cli.execute import execute
    from fwbench.report.terminal import tune_table

    timeout_s = positive_seconds(DEFAULT_TIMEOUT_S if timeout is None else timeout, "--timeout")
    # The core comparison, as --framework's help says (those installed).
    frameworks = framework or [n for n in core_frameworks() if FRAMEWORKS[n].installed()]
    for fw in frameworks:
        if fw not in FRAMEWORKS:
            raise SpecError(f"unknown framework {fw!r}; valid choices: {', '.join(FRAMEWORKS)}")
    # Each case in one framework's default threads; --threads are the search's axis.
    fields = workload.fields()
    given: dict[str, Any] = {"model": model, **fields, "threads": default_threads()}
    for name in ("input_shape", "objective", *_SEARCHED[:-1]):
        del given[name]
    # Screening: one run per candidate. The fastest of many noisy estimates is biased low
    # (the winner's curse), so the pick is then confirmed, below, in fresh runs. Both are
    # checked before anything is listed or run; --max-time sets each run's time too.
    flags = ONE_RUN_TIME_FLAGS
    # The band is recorded with every result, and the verdicts below read it.
    read = {"band": band} if band is not None else {}
    screen = timing_config(
        flags, max_time_s=max_time, run_time_s=max_time, min_runs=1, max_runs=1, **read
    )
    confirm_timing = timing_config(flags, max_time_s=3 * max_time, **read)
    defaults = {fw: tune.default_case(fw, given) for fw in frameworks}
    candidates = tune.search_space(
        frameworks, given, mode or (), precision or (), threads or (), framework_options or ()
    )
    cases = list(dict.fromkeys([*defaults.values(), *candidates]))
    if dry_run:
        if json:
            print_json([{"label": case.label(), "key": case.key()} for case in cases])
            return
        for case in cases:
            console.print(case.label(), markup=False)
        console.print(f"{len(cases)} candidates")
        return
    console.print(f"tuning [bold]{model}[/bold] {workload.task}: {len(cases)} candidates into {db}")
    results = execute(cases, db, RunOptions(timing=screen, timeout_s=timeout_s, interleave=False))
    picked = tune.choose(frameworks, results, defaults)
    finalists = list(
        dict.fromkeys(r.case for c in picked.choices for r in (c.default, c.best) if r is not None)
    )
    console.print(
        f"confirming {len(finalists)} finalists (each best against its default) in fresh, "
        "interleaved runs"
    )
    confirm = RunOptions(
        timing=confirm_timing,
        timeout_s=timeout_s,
        group_by=lambda case: "finalists",
    )
    outcome = tune.choose(frameworks, execute(finalists, db, confirm), defaults)
    # How many were tried (and failed) is the screening's.
    choices = [
        dataclasses.replace(c, tried=s.tried, failed=s.failed)
        for c, s in zip(outcome.choices, picked.choices, strict=True)
    ]
    outcome = dataclasses.replace(outcome, choices=choices, screened=len(cases))
    if json:
        print_json(_record(outcome))
        return
    out.print(tune_table(outcome))
    for title, verdict in (
        ("default vs default", outcome.default_vs_default),
        ("best vs best", outcome.best_vs_best),
    ):
        out.print(f"{title}: {verdict.text() if verdict else 'not enough results to compare'}")


def _verdict(v: Verdict | None) -> dict[str, Any] | None:
    if v is None:
        return None
    return {
        "faster": v.faster,
        "slower": v.slower,
        "ratio": v.ratio,
        "ci_low": v.ci_low,
        "ci_high": v.ci_high,
        "outcome": v.outcome,
        "equivalence_band": v.band,
        "runs": list(v.runs),
        "significant": v.significant,
        "text": v.text(),
    }


def _record(outcome: tune.TuneOutcome) -> dict[str, Any]:
    return {
        "frameworks": [
            {
                "framework": c.framework,
                "default": c.default.to_record() if c.default else None,
                "best": c.best.to_record() if c.best else None,
                "speedup": c.speedup,
                "best_vs_default": _verdict(c.confirmed()),
                "tried": c.tried,
                "failed": c.failed,
            }
            for c in outcome.choices
        ],
        "default_vs_default": _verdict(outcome.default_vs_default),
        "best_vs_best": _verdict(outcome.best_vs_best),
        "screened": outcome.screened,
    }
