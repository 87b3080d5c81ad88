"""The `fwbench` command: registers one module per command and turns errors into one line."""

from __future__ import annotations

import sys

import typer

from fwbench.cli import (
    compare,
    env,
    explain,
    export,
    models,
    peak,
    report,
    results,
    run,
    sweep,
    tune,
)
from fwbench.cli.common import console
from fwbench.errors import FwbenchError

app = typer.Typer(
    name="fwbench",
    help="Benchmark deep learning frameworks against each other on this machine, fairly.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("run")(run.command)
app.command("sweep")(sweep.command)
app.command("models")(models.command)
app.command("env")(env.command)
app.command("results")(results.command)
app.command("export")(export.command)
app.command("report")(report.command)
app.command("peak")(peak.command)
app.command("compare")(compare.command)
app.command("explain")(explain.command)
app.command("tune")(tune.command)


def main() -> None:
    try:
        app()  # standalone: usage errors print click's message and exit 2
    except FwbenchError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
