"""`fwbench export`: results to CSV, Parquet or JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fwbench.cli.common import console, note, warn
from fwbench.cli.options import DEFAULT_DB, DbOption
from fwbench.errors import SpecError
from fwbench.outputs import FileArg, check_output, database, refuse_overwrite
from fwbench.store import EXPORT_FORMATS


def command(
    output: Annotated[Path, typer.Option("-o", "--output", help="File to write.")],
    format: Annotated[
        str | None,
        typer.Option("--format", help=f"{' | '.join(EXPORT_FORMATS)} [default: from -o]"),
    ] = None,
    db: DbOption = DEFAULT_DB,
) -> None:
    """Export every stored result, one row per case result with all its samples."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.store.db import ResultStore
    from fwbench.store.export import export

    check_output(output, "-o")
    named = output.suffix.lstrip(".").lower()
    fmt = format or named
    if format and named in EXPORT_FORMATS and named != format:
        raise SpecError(f"-o {output} says .{named} but --format says {format}; give one")
    refuse_overwrite([FileArg("-o", output, "the export")], [database("--db", db)])
    with ResultStore(db, read_only=True, on_skip=warn, on_snapshot=note) as store:
        n = export(store, fmt, output)
    console.print(f"{n} results written to {output} ({fmt})")
