"""`fwbench run`: one case from flags."""

from __future__ import annotations

from typing import Annotated

import typer

from fwbench.cli import choices
from fwbench.cli.bundles import takes
from fwbench.cli.common import console, print_json
from fwbench.cli.options import (
    DEFAULT_DB,
    BudgetOption,
    DbOption,
    FrameworksOption,
    InterleaveOption,
    JsonOption,
    ModelOption,
    ModesOption,
    OptionsOption,
    TimeoutOption,
)
from fwbench.cli.workload import Timing, Workload
from fwbench.errors import duration_seconds
from fwbench.launch import DEFAULT_TIMEOUT_S
from fwbench.measure.settings import TimingConfig


def _world_sizes(given: list[int] | None) -> list[int | None]:
    return list(given) if given else [None]


@takes(workload=Workload, timing=Timing)
def command(
    framework: FrameworksOption,
    model: ModelOption,
    workload: Workload = Workload(),
    mode: ModesOption = None,
    framework_options: OptionsOption = None,
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            help=choices.strategies_help() + " See docs/distributed.md.",
            autocompletion=choices.complete_strategy,
        ),
    ] = None,
    world_size: Annotated[
        list[int] | None,
        typer.Option(
            help="Replicas (processes, or devices for a strategy that drives several from "
            "one process); repeat to measure scaling, e.g. --world-size 1 --world-size 2."
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
    timing: Timing = Timing(),
    budget: BudgetOption = None,
    timeout: TimeoutOption = None,
    interleave: InterleaveOption = True,
    flops: Annotated[bool, typer.Option(help="Count FLOPs per step after timing.")] = True,
    json: JsonOption = False,
) -> None:
    """Benchmark one case (per framework) in fresh worker processes and store the results.

    With one framework, --json prints one record; with several, a list of records.
    """
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.api import RunOptions, executor_named
    from fwbench.cli.execute import execute
    from fwbench.report.terminal import (
        answer_text,
        describe_result,
        report_tables,
        scaling_table,
        summary_table,
    )

    cases = [
        case
        for workers in _world_sizes(world_size)
        for case in workload.cases(
            model, framework, mode or [], strategy, framework_options, world_size=workers
        )
    ]
    budget_s = duration_seconds(budget, "--budget") if budget is not None else None
    options = RunOptions(
        timing=timing.over(TimingConfig()),
        timeout_s=DEFAULT_TIMEOUT_S if timeout is None else timeout,
        interleave=interleave,
        count_flops=flops,
        executor=executor_named("local", budget_s=budget_s),
    )
    results = execute(cases, db, options)
    if json:
        records = [r.to_record() for r in results]
        print_json(records[0] if len(records) == 1 else records)
        return
    for result in results:
        console.print(describe_result(result))
    if len(results) > 1:
        console.print(answer_text(results))
        console.print(summary_table(results, title="Comparison"))
    for table in report_tables(results):
        console.print(table)
    if any(r.case.strategy for r in results):
        console.print(scaling_table(results))
