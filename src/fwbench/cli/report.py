"""`fwbench report`: a Markdown summary of stored results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fwbench.cli.common import DEFAULT_DB_PATH, DbOption, console
from fwbench.errors import SpecError
from fwbench.report import markdown
from fwbench.store.db import ResultStore


def command(
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write.")] = Path(
        "fwbench-results/report.md"
    ),
    db: DbOption = DEFAULT_DB_PATH,
    run: Annotated[str | None, typer.Option(help="Only this run id.")] = None,
    format: Annotated[str, typer.Option("--format", help="md")] = "md",
) -> None:
    """Write a report: side-by-side table, verdicts, failures, warnings, environment."""
    if format != "md":
        raise SpecError(f"unknown report format {format!r}; valid choices: md")
    with ResultStore(db, read_only=True) as store:
        results = store.results(run_id=run)
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(f".{output.name}.tmp")
    tmp.write_text(markdown.render(results))
    tmp.replace(output)
    console.print(f"report of {len(results)} results written to {output}")
