"""`fwbench run`: one case from flags."""

from __future__ import annotations

from typing import Annotated

import typer

from fwbench.api import DEFAULT_TIMEOUT_S, RunOptions
from fwbench.case import Case, default_threads
from fwbench.cli.common import (
    DEFAULT_DB_PATH,
    DbOption,
    JsonOption,
    console,
    describe_result,
    print_json,
)
from fwbench.cli.execute import execute
from fwbench.measure.timing import TimingConfig


def command(
    framework: Annotated[str, typer.Option(help="torch | tensorflow")],
    model: Annotated[str, typer.Option(help="Model name; see `fwbench models`.")],
    task: Annotated[str, typer.Option(help="train | infer")] = "train",
    batch_size: Annotated[int, typer.Option(help="Samples per step.")] = 32,
    input_size: Annotated[int, typer.Option(help="Image side in pixels.")] = 224,
    num_classes: Annotated[int, typer.Option(help="Output classes.")] = 1000,
    device: Annotated[str, typer.Option(help="cpu | cuda")] = "cpu",
    mode: Annotated[str, typer.Option(help="eager (both) | graph (tensorflow)")] = "eager",
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
    json: JsonOption = False,
) -> None:
    """Benchmark one case in a fresh worker process and store the result."""
    case = Case.build(
        framework=framework,
        model=model,
        task=task,
        batch_size=batch_size,
        input_size=input_size,
        num_classes=num_classes,
        device=device,
        mode=mode,
        threads=threads or default_threads(),
    )
    timing = TimingConfig(target_ci=target_ci, max_time_s=max_time)
    (result,) = execute([case], db, RunOptions(timing=timing, timeout_s=timeout))
    if json:
        print_json(result.to_record())
    else:
        console.print(describe_result(result))
