"""`fwbench serve`: latency under load with MLPerf LoadGen, per framework (docs/serving.md)."""

from __future__ import annotations

import contextlib
import importlib.util
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fwbench.case import Case
from fwbench.cli import choices
from fwbench.cli.bundles import take, takes
from fwbench.cli.common import console, defer, print_json, storing
from fwbench.cli.options import (
    DEFAULT_DB,
    DbOption,
    FrameworksOption,
    JsonOption,
    ModelOption,
    ModesOption,
    OptionsOption,
    ReportOption,
    RequireIdleOption,
    TimeoutOption,
)
from fwbench.cli.workload import Workload
from fwbench.errors import SpecError, StoreError, positive_seconds
from fwbench.launch import DEFAULT_TIMEOUT_S
from fwbench.measure.settings import TimingConfig
from fwbench.outputs import check_output, database, refuse_overwrite, report_output
from fwbench.report.write import check_report_path, report_format, write_report
from fwbench.scenario.spec import SCENARIOS, ServeSpec, check_point, point_key, point_label
from fwbench.tasks.infer import INFER

if TYPE_CHECKING:
    from fwbench.api import RunOptions
    from fwbench.launch.serving import Point
    from fwbench.result import Result


def log_root(db: Path) -> Path:
    """LoadGen's logs live beside the database: `<db>.serving/<result id>/run<k>/`."""
    return db.parent / f"{db.name}.serving"


def execute_serving(
    points: Sequence[Point],
    db: Path,
    runs: int,
    options: RunOptions,
) -> list[Result]:
    """Serve every point into `db` with a progress bar, storing each as its runs come in
    (api.serve_points: the executor, rounds and resume rule of step-time cases).
    Returns the newest stored result of every point (measured now or resumed)."""
    from fwbench.api import done_points, serve_points
    from fwbench.cli.execute import removed_if_empty, warn_rescued
    from fwbench.cli.progress import case_progress, serving_outcome_of
    from fwbench.environment import host_environment
    from fwbench.store.db import ResultStore
    from fwbench.store.rescue import check_free_space

    if runs < 1:
        raise SpecError(f"runs: must be 1 or more (got {runs})")
    if importlib.util.find_spec("mlperf_loadgen") is None:
        raise SpecError(
            "serving needs MLPerf LoadGen: pip install 'fwbench[serve]' (mlcommons-loadgen)"
        )
    for point in points:
        check_point(point.case, point.spec)
    check_output(db, "--db")
    if runs == 1:
        console.print(
            "[yellow]warning[/yellow]: 1 run per point: its intervals exclude the variation "
            "between processes"
        )
    keys = [point_key(p.case, p.spec) for p in points]
    check_free_space(db)
    storing(db)
    with removed_if_empty(db), ResultStore(db) as store:
        done = done_points(store, options)
        todo = [p for p in points if point_key(p.case, p.spec) not in done]
        if len(todo) < len(points):
            console.print(
                f"resuming: {len(points) - len(todo)} of {len(points)} serving points "
                f"already recorded in {db}"
            )
        invocation_id = store.start_invocation(
            shlex.join(["fwbench", *sys.argv[1:]]), host_environment()
        )
        # No estimate of the time left: a rate search takes far longer than a fixed rate.
        with (
            case_progress(len(todo), eta=False) as progress,
            contextlib.redirect_stdout(sys.stderr),
        ):

            def on_start(case: Case) -> None:
                progress.started(case.label())

            served = serve_points(
                todo,
                store,
                invocation_id,
                runs,
                log_root(db),
                options,
                on_start=on_start,
                on_status=progress.status,
            )
            made: dict[str, Result] = {}
            for result in served:
                made[result.point_key] = result
                label = point_label(result.case, result.served.spec)
                progress.finished(label, *serving_outcome_of(result))
                warn_rescued(store, progress.console)
        latest = {r.point_key: r for r in store.serving()}  # oldest first: the newest wins
        if store.rescue:
            defer(StoreError(store.rescue.message()))
            latest |= {k: r for k, r in made.items() if r.result_id in store.rescue.records}
    return [latest[k] for k in keys if k in latest]


def print_tables(results: Sequence[Result], band: float | None = None) -> None:
    """The serving tables; `band`: the one their verdicts read (a sweep's), else 2%."""
    from fwbench.report.terminal import serving_tables

    for table in serving_tables(results, band):
        console.print(table)


# The workload but the batch, which serve sweeps, the training objective, and the layout
# and autotuning it leaves to the framework; its task is one a server serves.
@takes(
    workload=take(
        Workload,
        omit=("batch_size", "objective", "layout", "autotune"),
        replace={
            "task": (
                Annotated[str, typer.Option(help=choices.served_tasks_help())],
                INFER.name,
            )
        },
    )
)
def command(
    framework: FrameworksOption,
    model: ModelOption,
    workload: Workload = Workload(),
    scenario: Annotated[
        list[str] | None,
        typer.Option(help=f"{', '.join(SCENARIOS)}; repeat for several. [default: single_stream]"),
    ] = None,
    batch_size: Annotated[
        list[int] | None,
        typer.Option(
            help="single_stream: inputs per query; server: the dynamic batcher's largest "
            "batch; offline: the batch samples run in. Repeat for several. [default: 1]"
        ),
    ] = None,
    qps: Annotated[
        list[float] | None,
        typer.Option(
            help="server: Poisson arrivals at this rate (repeat for a latency-throughput "
            "curve). Left out, the highest rate under the bound is searched for."
        ),
    ] = None,
    latency_bound_ms: Annotated[
        float | None, typer.Option(help="server: the latency bound, ms. [default: 100]")
    ] = None,
    ttft_bound_ms: Annotated[
        float | None,
        typer.Option(
            help="server, task generate: the time-to-first-token bound, ms. [default: 2000]"
        ),
    ] = None,
    tpot_bound_ms: Annotated[
        float | None,
        typer.Option(
            help="server, task generate: the bound on each later token's time, ms. [default: 200]"
        ),
    ] = None,
    percentile: Annotated[
        float | None,
        typer.Option(help="server: the share of queries that must meet the bound. [default: 0.99]"),
    ] = None,
    max_wait_ms: Annotated[
        float | None,
        typer.Option(help="server: longest a query waits for its batch to fill, ms. [default: 2]"),
    ] = None,
    search_steps: Annotated[
        int | None, typer.Option(help="server search: bisection steps per run. [default: 6]")
    ] = None,
    duration: Annotated[
        float, typer.Option(help="Seconds each LoadGen test lasts at least.")
    ] = 10.0,
    runs: Annotated[
        int, typer.Option(help="Worker processes per point; intervals are over runs.")
    ] = 3,
    mode: ModesOption = None,
    framework_options: OptionsOption = None,
    db: DbOption = DEFAULT_DB,
    require_idle: RequireIdleOption = None,
    timeout: TimeoutOption = None,
    report: ReportOption = None,
    json: JsonOption = False,
) -> None:
    """Serve a model under MLPerf LoadGen's scenarios in each framework and compare latency
    percentiles, rates under a latency bound and offline throughput; with --task generate,
    time to first token and time per output token of streamed generations."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.api import RunOptions
    from fwbench.launch.serving import Point

    timeout_s = positive_seconds(DEFAULT_TIMEOUT_S if timeout is None else timeout, "--timeout")
    server = {
        "latency_bound_ms": latency_bound_ms,
        "ttft_bound_ms": ttft_bound_ms,
        "tpot_bound_ms": tpot_bound_ms,
        "percentile": percentile,
        "max_wait_ms": max_wait_ms,
        "search_steps": search_steps,
    }
    specs = []
    for name in scenario or ["single_stream"]:
        if name.lower().replace("-", "_") != "server":
            specs.append(ServeSpec.build(scenario=name, duration_s=duration))
            continue
        rates: list[float | None] = list(qps) if qps else [None]
        for rate in rates:
            given = {k: v for k, v in server.items() if v is not None}
            if rate is not None:
                given = {k: v for k, v in given.items() if k != "search_steps"}
            specs.append(
                ServeSpec.build(scenario=name, target_qps=rate, duration_s=duration, **given)
            )
    if not any(s.scenario == "server" for s in specs):
        named = ["qps" if qps else "", *(k for k, v in server.items() if v is not None)]
        if any(named):
            flag = "--" + next(g for g in named if g).replace("_", "-")
            raise SpecError(f"{flag}: applies to the server scenario; add --scenario server")
    cases = [
        case
        for b in batch_size or [1]
        for case in workload.cases(
            model, framework, mode or [], options=framework_options, batch_size=b
        )
    ]
    reports = report or []
    formats = [report_format(path, None) for path in reports]
    store = database("--db", db)
    refuse_overwrite(
        [store, *(report_output("--report", p, f) for p, f in zip(reports, formats, strict=True))],
        [store],
    )
    for path, fmt in zip(reports, formats, strict=True):
        check_report_path(path, fmt)
    points = [Point(c, s) for s in specs for c in cases]
    options = RunOptions(
        timing=TimingConfig.of(require_idle=bool(require_idle)), timeout_s=timeout_s
    )
    results = execute_serving(points, db, runs, options)
    if json:
        print_json([r.to_record() for r in results])
    else:
        print_tables(results)
        console.print(f"LoadGen's logs: {log_root(db)}")
    for path, fmt in zip(reports, formats, strict=True):
        write_report(results, path, fmt, title="fwbench serve")
        console.print(f"report written to {path}")
