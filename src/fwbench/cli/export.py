"""`fwbench export`: results to CSV, Parquet or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fwbench.cli.common import DEFAULT_DB_PATH, DbOption, console, note, warn
from fwbench.outputs import FileArg, database, refuse_overwrite
from fwbench.store.db import ResultStore
from fwbench.store.export import FORMATS, export


def command(
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write.")],
    format: Annotated[
        str | None, typer.Option("--format", help=f"{' | '.join(FORMATS)} [default: from -o]")
    ] = None,
    db: DbOption = DEFAULT_DB_PATH,
) -> None:
    """Export every stored result, one row per case result with all its samples."""
    fmt = format or output.suffix.lstrip(".").lower()
    refuse_overwrite([FileArg("-o", output, "the export")], [database("--db", db)])
    with ResultStore(db, read_only=True, on_skip=warn, on_snapshot=note) as store:
        n = export(store, fmt, output)
    console.print(f"{n} results written to {output} ({fmt})")
