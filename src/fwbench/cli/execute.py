"""Run validated cases with a progress bar, storing each result as it arrives."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from fwbench.api import RunOptions, done_keys, run_cases
from fwbench.cache import cache_dir
from fwbench.case import Case
from fwbench.cli.common import console, defer, storing
from fwbench.cli.progress import case_progress, outcome_of
from fwbench.environment import host_environment
from fwbench.errors import StoreError
from fwbench.report.plain import escape
from fwbench.result import Result
from fwbench.store.db import ResultStore
from fwbench.store.rescue import check_free_space
from fwbench.sweep import estimate


def execute(cases: list[Case], db: Path, options: RunOptions) -> list[Result]:
    """Run `cases` into `db`; return the latest stored result of every case (run or resumed).
    A database this command made and stored no result in is removed when the command
    fails (an executor it could not reach, bad input found late): nothing half-made."""
    cache_dir()  # a cache folder the user named and cannot be used: said before any work
    with removed_if_empty(db):
        return _execute(cases, db, options)


@contextlib.contextmanager
def removed_if_empty(db: Path) -> Iterator[None]:
    """Around a command that makes `db`: if it fails, a database it created and stored no
    result or serving point in is removed, with its log."""
    created = not db.exists()
    try:
        yield
    except BaseException:
        if created and db.is_file() and not _holds_results(db):
            for made in (db, db.with_name(db.name + ".wal")):
                with contextlib.suppress(OSError):
                    made.unlink(missing_ok=True)
        raise


def cases_left(cases: list[Case], db: Path, resume: bool, retry_failed: bool) -> list[Case]:
    """The cases a resumed command would measure: all of them unless it resumes from a
    database that exists (read through a snapshot where a sweep is writing it)."""
    if not (resume or retry_failed) or not db.exists():
        return cases
    options = RunOptions(resume=True, retry_failed=retry_failed)
    with ResultStore(db, read_only=True, on_snapshot=lambda _: None) as store:
        done = done_keys(store, options)
    return [c for c in cases if c.key() not in done]


def _holds_results(db: Path) -> bool:
    if not db.exists():
        return False
    try:
        with ResultStore(db, read_only=True) as store:
            return bool(store.recorded_keys() or store.serving())
    except Exception:
        return True  # unreadable: not ours to remove


def _execute(cases: list[Case], db: Path, options: RunOptions) -> list[Result]:
    check_free_space(db)
    storing(db)
    with ResultStore(db) as store:
        host = host_environment()
        invocation_id = store.start_invocation(shlex.join(["fwbench", *sys.argv[1:]]), host)
        skipped = len({c.key() for c in cases} & done_keys(store, options))
        if skipped:
            console.print(f"resuming: {skipped} of {len(cases)} cases already recorded in {db}")
        # The plan's cost, said before it is spent (the bar then refines it as cases end).
        budget_s = getattr(options.executor, "budget_s", None)
        planned = estimate(len(cases) - skipped, options.timing, budget_s)
        if planned.cases:
            cases_text = f"{planned.cases} case{'s' if planned.cases != 1 else ''}"
            console.print(f"plan: {cases_text}; {planned.describe()}", markup=False)
        # Only --json output may go to stdout; Ray's driver prints its errors ("a worker
        # died ...") there from a thread of its own.
        with (
            case_progress(len(cases) - skipped) as progress,
            contextlib.redirect_stdout(sys.stderr),
        ):

            def on_start(case: Case) -> None:
                progress.started(case.label())

            made: dict[str, Result] = {}
            for result in run_cases(
                cases, store, invocation_id, options, on_start, progress.status, host
            ):
                made[result.case_key] = result
                progress.finished(result.case.label(), *outcome_of(result))
                warn_rescued(store, progress.console)
        keys = [c.key() for c in cases]
        if not store.rescue:
            return store.latest(keys)
        defer(StoreError(store.rescue.message()))
        # What the database did not take is shown from the records kept for it.
        stored = {r.case_key: r for r in store.latest(keys)}
        kept = {k: r for k, r in made.items() if r.result_id in store.rescue.records}
        return [r for k in keys if (r := kept.get(k) or stored.get(k)) is not None]


def warn_rescued(store: ResultStore, to: Console) -> None:
    """Say, once, that results go to a rescue file: the command goes on measuring."""
    rescue = store.rescue
    if rescue and not rescue.announced:
        rescue.announced = True
        to.print(
            f"[red]cannot write {store.path}[/red] ({escape(rescue.why)}): results are kept "
            f"in {escape(str(rescue.path))} (fwbench import reads it); measuring goes on",
            highlight=False,
        )
