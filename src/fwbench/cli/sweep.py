"""`fwbench sweep`: a grid of cases from a YAML file or a built-in preset."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fwbench import sweep as sweeps
from fwbench.api import DEFAULT_TIMEOUT_S, RunOptions, executor_named
from fwbench.cli.common import (
    DEFAULT_DB_PATH,
    DbOption,
    JsonOption,
    console,
    print_json,
    summary_table,
)
from fwbench.cli.execute import execute
from fwbench.errors import SpecError
from fwbench.report.write import report_format, write_report


def command(
    file: Annotated[Path | None, typer.Argument(help="Sweep YAML file.")] = None,
    preset: Annotated[
        str | None, typer.Option(help="A built-in sweep instead of a file, e.g. quick.")
    ] = None,
    db: DbOption = DEFAULT_DB_PATH,
    resume: Annotated[bool, typer.Option(help="Skip cases already recorded in --db.")] = False,
    timeout: Annotated[
        float | None, typer.Option(help="Seconds per case before its worker is stopped.")
    ] = None,
    report: Annotated[
        list[Path] | None,
        typer.Option(help="Also write a report of the sweep here (.html or .md; repeat)."),
    ] = None,
    interleave: Annotated[
        bool,
        typer.Option(help="Alternate the framework/mode variants of each workload block by block."),
    ] = False,
    executor: Annotated[
        str, typer.Option(help="Where the cases run: local (this machine) or ray (a Ray cluster).")
    ] = "local",
    address: Annotated[
        str | None,
        typer.Option(
            help="With --executor ray: the cluster's address, or auto for the cluster this "
            "machine belongs to. Without it, Ray is started on this machine."
        ),
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="List the cases and stop.")] = False,
    json: JsonOption = False,
) -> None:
    """Run every case of a sweep, each in its own worker; a failed case never stops it."""
    if (file is None) == (preset is None):
        raise SpecError(
            f"give a sweep FILE or --preset NAME (presets: {', '.join(sweeps.presets())})"
        )
    sweep = sweeps.load_file(file) if file is not None else sweeps.load_preset(str(preset))
    reports = report or []
    formats = [report_format(path, None) for path in reports]  # checked before running
    runner = executor_named(executor, address)
    if dry_run:
        for case in sweep.cases:
            console.print(case.label())
        console.print(f"{len(sweep.cases)} cases")
        return
    timeout_s = timeout or sweep.timeout_s or DEFAULT_TIMEOUT_S
    options = RunOptions(
        timing=sweep.timing,
        timeout_s=timeout_s,
        resume=resume,
        interleave=interleave,
        executor=runner,
    )
    on = "" if executor == "local" else f" on Ray ({address or 'a local instance'})"
    console.print(f"sweep [bold]{sweep.name}[/bold]: {len(sweep.cases)} cases into {db}{on}")
    results = execute(sweep.cases, db, options)
    if json:
        print_json([r.to_record() for r in results])
    else:
        console.print(summary_table(results, title=f"Sweep {sweep.name}"))
    for path, fmt in zip(reports, formats, strict=True):
        write_report(results, path, fmt, title=f"fwbench sweep {sweep.name}")
        console.print(f"report written to {path}")
