"""`fwbench import`: results exported as JSON (here or on another machine) into a database."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from fwbench.cli.common import console, progress_bar, warn
from fwbench.cli.options import DEFAULT_DB, DbOption
from fwbench.outputs import FileArg, database, refuse_overwrite

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID

# Records from which an import shows its progress: checking runs at a few thousand
# records a second, so from 20k the wait is long enough to show.
LONG_IMPORT = 20_000


def command(
    files: Annotated[list[Path], typer.Argument(help="JSON exports (`fwbench export -o x.json`).")],
    db: DbOption = DEFAULT_DB,
) -> None:
    """Add exported results to a database, where report, compare and results read them.

    Records of any earlier schema version are read as a migrated database reads them.
    Every file is validated before anything is written; results already in the database
    (same result id) are skipped.
    """
    # --db is written in place: it must not be one of the exports being read.
    refuse_overwrite([database("--db", db)], [FileArg("FILE", f, "the JSON input") for f in files])
    bar = progress_bar(eta=False)
    try:
        added, total, distinct = _import(files, db, bar)
    finally:
        if bar.live.is_started:  # stopping a bar never shown prints an empty line
            bar.stop()
    notes = []
    if distinct - added:
        notes.append(f"{distinct - added} already there")
    if total - distinct:
        notes.append(f"{total - distinct} given again: the furthest along kept")
    note = f" ({'; '.join(notes)})" if notes else ""
    console.print(f"{added} results imported into {db}{note}")


def _import(files: list[Path], db: Path, bar: Progress) -> tuple[int, int, int]:
    """Read and check every file, then write them in one transaction: (added, read,
    distinct results read)."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.result import Result
    from fwbench.store.db import ResultStore, Row
    from fwbench.store.imports import iter_records

    rows: list[Row] = []
    points: list[Result] = []
    for path in files:
        task = bar.add_task(f"checking {path.name}", visible=False)

        def advance(done: int, total: int, task: TaskID = task) -> None:
            if total >= LONG_IMPORT:
                bar.start()
                bar.update(task, completed=done, total=total, visible=True)

        # Each result is kept as its row only (100k records: 1.3 GB peak as Results).
        for record in iter_records(path, warn=warn, progress=advance):
            if record.serving is not None:
                points.append(record)
            else:
                rows.append(Row.of(record))
    writing = bar.add_task("writing", total=len(rows), visible=len(rows) >= LONG_IMPORT)
    created = not db.exists()
    try:
        with ResultStore(db) as store:
            added = store.add_rows(
                rows,
                "import " + " ".join(str(f) for f in files),
                progress=lambda n: bar.advance(writing, n),
                serving=points,
            )
    except BaseException:
        # Nothing was written (one transaction): a file this command made goes too.
        if created:
            for made in (db, db.with_name(db.name + ".wal")):
                made.unlink(missing_ok=True)
        raise
    distinct = len({r.result_id for r in rows}) + len({p.result_id for p in points})
    return added, len(rows) + len(points), distinct
