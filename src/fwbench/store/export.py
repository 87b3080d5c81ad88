"""Export stored results to CSV, Parquet or JSON, written atomically.

CSV and Parquet are the results table's declared columns (fwbench.store.columns), with
typed parts as JSON text; JSON is every result's record (`Result.to_record`), which
`fwbench import` reads back through the same migrations as a database."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from fwbench.errors import StoreError
from fwbench.outputs import write_atomically
from fwbench.store import EXPORT_FORMATS, columns

if TYPE_CHECKING:
    from fwbench.store.db import ResultStore


def export(store: ResultStore, fmt: str, out: Path) -> int:
    """Write every result to `out`; returns the number of rows. A failure leaves no file."""
    if fmt not in EXPORT_FORMATS:
        raise StoreError(
            f"unknown export format {fmt!r}; valid choices: {', '.join(EXPORT_FORMATS)}"
        )
    rows = 0

    def write(tmp: Path) -> None:
        nonlocal rows
        if fmt == "json":
            records = [r.to_record() for r in store.results()]
            tmp.write_text(json.dumps(records, indent=1, default=str))
            rows = len(records)
            return
        option = "FORMAT PARQUET" if fmt == "parquet" else "FORMAT CSV, HEADER"
        escaped = str(tmp).replace("'", "''")
        # The declared columns, in their order (fwbench.store.columns), not whatever the
        # table holds.
        selected = ", ".join(columns.names())
        store.con.execute(
            f"COPY (SELECT {selected} FROM results ORDER BY recorded_at) TO '{escaped}' ({option})"
        )
        row = store.con.execute("SELECT count(*) FROM results").fetchone()
        rows = int(row[0]) if row else 0

    write_atomically(out, write, "export")
    return rows
