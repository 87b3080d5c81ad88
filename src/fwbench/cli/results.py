"""`fwbench results`: what is stored."""

from __future__ import annotations

from typing import Annotated

import typer

from fwbench.cli.common import invocation_of, note, out, print_json, warn
from fwbench.cli.options import (
    DEFAULT_DB,
    DbOption,
    InvocationOption,
    JsonOption,
    RunAliasOption,
)
from fwbench.errors import SpecError


def command(
    db: DbOption = DEFAULT_DB,
    invocation: InvocationOption = None,
    summary: Annotated[bool, typer.Option(help="Side-by-side frameworks instead of rows.")] = False,
    json: JsonOption = False,
    run: RunAliasOption = None,
) -> None:
    """List stored results (every invocation's, oldest first)."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.report.terminal import (
        answer_text,
        report_tables,
        results_table,
        summary_table,
    )
    from fwbench.store.db import ResultStore

    invocation = invocation_of(invocation, run)
    with ResultStore(db, read_only=True, on_skip=warn, on_snapshot=note) as store:
        results = store.results(invocation_id=invocation)
        asked = invocation is not None and not results
        known = {r["invocation_id"] for r in store.invocations()} if asked else set()
    if asked and invocation not in known:
        # An id mistyped read as an empty table, as if that invocation measured nothing.
        raise SpecError(f"{db} holds no invocation {invocation!r}; see `fwbench results`")
    if json:
        print_json([r.to_record() for r in results])
        return
    if summary:
        if results:
            out.print(answer_text(results))
        out.print(summary_table(results, title=f"Results in {db}"))
        for table in report_tables(results):
            out.print(table)
        return
    out.print(results_table(results, db))
