"""`fwbench import`: results exported as JSON (here or on another machine) into a database."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from fwbench.cli.common import DEFAULT_DB_PATH, DbOption, console
from fwbench.outputs import FileArg, database, refuse_overwrite
from fwbench.store.db import ResultStore
from fwbench.store.imports import read_records


def command(
    files: Annotated[list[Path], typer.Argument(help="JSON exports (`fwbench export -o x.json`).")],
    db: DbOption = DEFAULT_DB_PATH,
) -> None:
    """Add exported results to a database, where report, compare and results read them.

    Records of any earlier schema version are read as a migrated database reads them.
    Every file is validated before anything is written; results already in the database
    (same result id) are skipped.
    """
    # --db is written in place: it must not be one of the exports being read.
    refuse_overwrite([database("--db", db)], [FileArg("FILE", f, "the JSON input") for f in files])
    results = [r for path in files for r in read_records(path)]
    with ResultStore(db) as store:
        added = store.add_many(results, "import " + " ".join(str(f) for f in files))
    skipped = len(results) - added
    note = f" ({skipped} already there)" if skipped else ""
    console.print(f"{added} results imported into {db}{note}")
