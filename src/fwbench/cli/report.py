"""`fwbench report`: the HTML report (self-contained) or a Markdown summary with PNG charts."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from fwbench.cli.common import DEFAULT_DB_PATH, console
from fwbench.errors import SpecError
from fwbench.report import html, markdown, png
from fwbench.store.db import ResultStore

FORMATS = ("html", "md")


def command(
    results: Annotated[
        Path | None, typer.Argument(help="Results file. [default: --db or the default file]")
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", help="File to write. [default: report.html / report.md]"),
    ] = None,
    format: Annotated[str | None, typer.Option("--format", help="html | md")] = None,
    db: Annotated[Path, typer.Option("--db", help="Results file (DuckDB).")] = DEFAULT_DB_PATH,
    run: Annotated[str | None, typer.Option(help="Only this run id.")] = None,
    title: Annotated[str, typer.Option(help="Report title.")] = "fwbench report",
) -> None:
    """Write a report: verdicts, the studies' charts, failures, warnings, environment."""
    fmt = format or (output.suffix.lstrip(".") if output else "html")
    if fmt not in FORMATS:
        raise SpecError(f"unknown report format {fmt!r}; valid choices: {', '.join(FORMATS)}")
    source = results or db
    output = output or source.parent / f"report.{fmt}"
    with ResultStore(source, read_only=True) as store:
        stored = store.results(run_id=run)
    if not stored:
        raise SpecError(f"{source} holds no results" + (f" for run {run}" if run else ""))
    output.parent.mkdir(parents=True, exist_ok=True)
    # Written into a scratch folder and moved: a failure leaves no half-written report.
    with tempfile.TemporaryDirectory(dir=output.parent) as tmp:
        scratch = Path(tmp) / output.name
        if fmt == "html":
            scratch.write_text(html.render(stored, title=title))
        else:
            chart_dir = f"{output.stem}-charts"
            charts = png.write_charts(stored, Path(tmp) / chart_dir)
            rel = [(caption, f"{chart_dir}/{path.name}") for caption, path in charts]
            scratch.write_text(markdown.render(stored, title=title, charts=rel))
            final_charts = output.parent / chart_dir
            if final_charts.exists():
                shutil.rmtree(final_charts)
            if charts:
                (Path(tmp) / chart_dir).replace(final_charts)
        scratch.replace(output)
    console.print(f"report of {len(stored)} results written to {output}")
