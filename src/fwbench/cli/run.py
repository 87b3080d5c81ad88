"""`fwbench run`: one case from flags."""

from __future__ import annotations

from typing import Annotated

import typer

from fwbench.cli import choices
from fwbench.cli.common import cases_per_framework, console, print_json, timing_flags
from fwbench.cli.options import (
    DEFAULT_DB,
    AutotuneOption,
    BandOption,
    BatchSizeOption,
    BudgetOption,
    CompileCacheOption,
    DbOption,
    DeviceOption,
    EstimatorOption,
    FrameworksOption,
    FreqBinsOption,
    InputShapeOption,
    InputSizeOption,
    InterleaveOption,
    JsonOption,
    LayoutOption,
    MaxRunsOption,
    MaxTimeOption,
    MinRunsOption,
    ModelOption,
    ModesOption,
    NumClassesOption,
    ObjectiveOption,
    OptionsOption,
    PrecisionOption,
    RequireIdleOption,
    SeqLenOption,
    TargetCiOption,
    TaskDimsOption,
    TaskOption,
    ThreadsOption,
    TimeoutOption,
    VocabSizeOption,
)
from fwbench.errors import duration_seconds
from fwbench.launch import DEFAULT_TIMEOUT_S
from fwbench.measure.settings import TimingConfig
from fwbench.tasks.train import TRAIN


def _world_sizes(given: list[int] | None) -> list[int | None]:
    return list(given) if given else [None]


def command(
    framework: FrameworksOption,
    model: ModelOption,
    task: TaskOption = TRAIN.name,
    task_dims: TaskDimsOption = None,
    batch_size: BatchSizeOption = None,
    input_shape: InputShapeOption = None,
    objective: ObjectiveOption = None,
    input_size: InputSizeOption = None,
    seq_len: SeqLenOption = None,
    vocab_size: VocabSizeOption = None,
    freq_bins: FreqBinsOption = None,
    num_classes: NumClassesOption = None,
    precision: PrecisionOption = None,
    layout: LayoutOption = None,
    autotune: AutotuneOption = False,
    device: DeviceOption = "cpu",
    mode: ModesOption = None,
    framework_options: OptionsOption = None,
    threads: ThreadsOption = 0,
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
    target_ci: TargetCiOption = None,
    max_time: MaxTimeOption = None,
    min_runs: MinRunsOption = None,
    max_runs: MaxRunsOption = None,
    estimator: EstimatorOption = None,
    band: BandOption = None,
    budget: BudgetOption = None,
    require_idle: RequireIdleOption = False,
    compile_cache: CompileCacheOption = True,
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
        for case in cases_per_framework(
            framework,
            mode or [],
            strategy,
            framework_options,
            input_shape=input_shape,
            objective=objective,
            model=model,
            task=task,
            task_dims=task_dims,
            batch_size=batch_size,
            input_size=input_size,
            seq_len=seq_len,
            vocab_size=vocab_size,
            freq_bins=freq_bins,
            num_classes=num_classes,
            precision=precision,
            layout=layout,
            autotune=autotune,
            device=device,
            threads=threads,
            world_size=workers,
        )
    ]
    timing = timing_flags(
        TimingConfig(),
        target_ci=target_ci,
        max_time=max_time,
        min_runs=min_runs,
        max_runs=max_runs,
        estimator=estimator,
        band=band,
        require_idle=require_idle,
        compile_cache=compile_cache,
    )
    budget_s = duration_seconds(budget, "--budget") if budget is not None else None
    options = RunOptions(
        timing=timing,
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
