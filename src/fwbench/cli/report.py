"""`fwbench report`: the HTML report (self-contained) or a Markdown summary with PNG charts."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from fwbench import sweep as sweeps
from fwbench.cli.common import band_flag, console, invocation_of, note, warn
from fwbench.cli.options import (
    DEFAULT_DB,
    BandOption,
    DbOption,
    InvocationOption,
    RunAliasOption,
)
from fwbench.errors import SpecError
from fwbench.outputs import database, refuse_overwrite, report_output
from fwbench.report.write import report_format, write_report
from fwbench.studies import studies


def command(
    results: Annotated[
        Path | None, typer.Argument(help="Results file. [default: --db or the default file]")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="File to write. [default: report.html / report.md]"),
    ] = None,
    format: Annotated[str | None, typer.Option("--format", help="html | md")] = None,
    db: DbOption = DEFAULT_DB,
    invocation: InvocationOption = None,
    title: Annotated[str, typer.Option(help="Report title.")] = "fwbench report",
    study: Annotated[
        str | None,
        typer.Option(
            help="Add the reproduction table of this study: "
            + ", ".join(studies())
            + " (its claims against these results).",
        ),
    ] = None,
    band: BandOption = None,
    run: RunAliasOption = None,
) -> None:
    """Write a report: verdicts, the studies' charts, failures, warnings, environment."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.store.db import ResultStore
    from fwbench.studies.claims import load_study

    invocation = invocation_of(invocation, run)
    equivalence = band_flag(band)
    fmt = report_format(output, format, "-o", format_flag=True)
    if study is not None:
        load_study(study)  # an unknown study is refused before anything is read
    source = results or db
    flag = "-o" if output is not None else "the default report path"
    output = output or source.parent / f"report.{fmt}"
    # Before the store opens: opening may migrate the file, and the report replaces -o.
    refuse_overwrite(
        [report_output(flag, output, fmt)],
        [database("RESULTS" if results is not None else "--db", source)],
    )
    with ResultStore(source, read_only=True, on_skip=warn, on_snapshot=note) as store:
        stored = store.results(invocation_id=invocation)
        served = store.serving(invocation_id=invocation)
        commands = [
            r["command"]
            for r in store.invocations()
            if invocation is None or r["invocation_id"] == invocation
        ]
    if not stored and not served:
        raise SpecError(
            f"{source} holds no results" + (f" for invocation {invocation}" if invocation else "")
        )
    if study is None:
        study = study_of(commands)
        if study:
            console.print(
                f"adding study {study}'s reproduction table: its preset made these results"
            )
    write_report([*stored, *served], output, fmt, title, study, band=equivalence)
    points = f" and {len(served)} serving points" if served else ""
    console.print(f"report of {len(stored)} results{points} written to {output} ({fmt})")


def study_of(commands: list[str]) -> str | None:
    """The study of the built-in preset the results came from, when there is exactly one
    (`fwbench sweep --preset asu-infer-small` made them): a report of a study preset's
    database checks the study's claims without being told to."""
    found = set()
    for command in commands:
        try:
            words = shlex.split(command)
        except ValueError:
            continue
        for i, word in enumerate(words):
            name = word.split("=", 1)[1] if word.startswith("--preset=") else None
            if word == "--preset" and i + 1 < len(words):
                name = words[i + 1]
            if name in sweeps.presets():
                found.add(sweeps.load_preset(name).study)
    found.discard(None)
    return found.pop() if len(found) == 1 else None
