"""Run validated cases with a progress bar, storing each result as it arrives."""

from __future__ import annotations

import contextlib
import shlex
import sys
from pathlib import Path

from fwbench.api import RunOptions, done_keys, run_cases
from fwbench.case import Case
from fwbench.cli.common import console, progress_bar
from fwbench.environment import host_environment
from fwbench.result import Result
from fwbench.store.db import ResultStore


def execute(cases: list[Case], db: Path, options: RunOptions) -> list[Result]:
    """Run `cases` into `db`; return the latest stored result of every case (run or resumed)."""
    with ResultStore(db) as store:
        host = host_environment()
        invocation_id = store.start_invocation(shlex.join(["fwbench", *sys.argv[1:]]), host)
        skipped = len({c.key() for c in cases} & done_keys(store, options))
        if skipped:
            console.print(f"resuming: {skipped} of {len(cases)} cases already recorded in {db}")
        progress = progress_bar()
        # Only --json output may go to stdout; Ray's driver prints its errors ("a worker
        # died ...") there from a thread of its own.
        with progress, contextlib.redirect_stdout(sys.stderr):
            task = progress.add_task("preparing", total=len(cases) - skipped)

            def on_status(text: str) -> None:
                progress.update(task, description=text)

            def on_start(case: Case) -> None:
                progress.update(task, description=case.label())

            for result in run_cases(
                cases, store, invocation_id, options, on_start, on_status, host
            ):
                progress.advance(task)
                if result.status != "ok":
                    progress.console.print(
                        f"[red]{result.status}[/red] {result.case.label()}: {result.error}"
                    )
            progress.update(task, description="done")
        return store.latest([c.key() for c in cases])
