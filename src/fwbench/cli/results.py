"""`fwbench results`: what is stored."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from fwbench.cli.common import (
    DEFAULT_DB_PATH,
    DbOption,
    InvocationOption,
    JsonOption,
    RunAliasOption,
    invocation_of,
    note,
    out,
    print_json,
    report_tables,
    summary_table,
    unit_of,
    warn,
)
from fwbench.store.db import ResultStore


def command(
    db: DbOption = DEFAULT_DB_PATH,
    invocation: InvocationOption = None,
    summary: Annotated[bool, typer.Option(help="Side-by-side frameworks instead of rows.")] = False,
    json: JsonOption = False,
    run: RunAliasOption = None,
) -> None:
    """List stored results (every invocation's, oldest first)."""
    invocation = invocation_of(invocation, run)
    with ResultStore(db, read_only=True, on_skip=warn, on_snapshot=note) as store:
        results = store.results(invocation_id=invocation)
    if json:
        print_json([r.to_record() for r in results])
        return
    if summary:
        out.print(summary_table(results, title=f"Results in {db}"))
        for table in report_tables(results):
            out.print(table)
        return
    table = Table(title=f"{len(results)} results in {db}", title_justify="left")
    for col in (
        "invocation",
        "case",
        "status",
        "median ms",
        "95% CI ms",
        "throughput",
        "params",
        "note",
    ):
        table.add_column(col)
    for r in results:
        m = r.measurement
        table.add_row(
            r.invocation_id,
            r.case.label(),
            r.status,
            f"{m.step_time_s.median * 1e3:.2f}" if m else "-",
            f"{m.step_time_s.ci_low * 1e3:.2f}-{m.step_time_s.ci_high * 1e3:.2f}" if m else "-",
            f"{r.throughput:.1f} {unit_of(r)}/s" if r.throughput else "-",
            f"{r.param_count:,}" if r.param_count else "-",
            (r.error or "") + (" DIFFERENT WORK" if r.different_work else ""),
            style="yellow" if r.different_work else None,
        )
    out.print(table)
