"""`fwbench run`: one case from flags."""

from __future__ import annotations

from typing import Annotated

import typer

from fwbench.api import DEFAULT_TIMEOUT_S, RunOptions
from fwbench.cli.common import (
    DEFAULT_DB_PATH,
    AutotuneOption,
    DbOption,
    FreqBinsOption,
    InputSizeOption,
    JsonOption,
    LayoutOption,
    NumClassesOption,
    PrecisionOption,
    SeqLenOption,
    VocabSizeOption,
    cases_per_framework,
    console,
    describe_result,
    print_json,
    summary_table,
)
from fwbench.cli.execute import execute
from fwbench.errors import SpecError
from fwbench.measure.timing import TimingConfig


def command(
    framework: Annotated[
        list[str], typer.Option(help="torch | tensorflow; repeat to compare frameworks.")
    ],
    model: Annotated[str, typer.Option(help="Model name; see `fwbench models`.")],
    task: Annotated[str, typer.Option(help="train | infer")] = "train",
    batch_size: Annotated[int, typer.Option(help="Samples per step.")] = 32,
    input_size: InputSizeOption = None,
    seq_len: SeqLenOption = None,
    vocab_size: VocabSizeOption = None,
    freq_bins: FreqBinsOption = None,
    num_classes: NumClassesOption = None,
    precision: PrecisionOption = None,
    layout: LayoutOption = None,
    autotune: AutotuneOption = False,
    device: Annotated[str, typer.Option(help="cpu | cuda")] = "cpu",
    mode: Annotated[
        list[str] | None,
        typer.Option(
            help=(
                "eager (both) | script (torch) | graph, xla (tensorflow); "
                "one for all frameworks, or one each."
            )
        ),
    ] = None,
    threads: Annotated[
        int, typer.Option(help="Intra- and inter-op threads. [default: physical cores]")
    ] = 0,
    db: DbOption = DEFAULT_DB_PATH,
    target_ci: Annotated[
        float, typer.Option(help="Stop when the 95% CI of the median is within +-this share.")
    ] = 0.01,
    max_time: Annotated[
        float, typer.Option(help="Seconds of steady-state measuring at most (after 10 samples).")
    ] = 10.0,
    timeout: Annotated[float, typer.Option(help="Seconds before the worker is stopped.")] = (
        DEFAULT_TIMEOUT_S
    ),
    interleave: Annotated[
        bool,
        typer.Option(help="Alternate the frameworks' workers block by block (needs two or more)."),
    ] = False,
    flops: Annotated[bool, typer.Option(help="Count FLOPs per step after timing.")] = True,
    json: JsonOption = False,
) -> None:
    """Benchmark one case (per framework) in fresh worker processes and store the results.

    With one framework, --json prints one record; with several, a list of records.
    """
    if interleave and len(framework) < 2:
        raise SpecError("interleave: give two or more --framework to alternate")
    cases = cases_per_framework(
        framework,
        mode or ["eager"],
        model=model,
        task=task,
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
    )
    timing = TimingConfig(target_ci=target_ci, max_time_s=max_time)
    options = RunOptions(timing=timing, timeout_s=timeout, interleave=interleave, count_flops=flops)
    results = execute(cases, db, options)
    if json:
        records = [r.to_record() for r in results]
        print_json(records[0] if len(records) == 1 else records)
        return
    for result in results:
        console.print(describe_result(result))
    if len(results) > 1:
        console.print(summary_table(results, title="Comparison"))
