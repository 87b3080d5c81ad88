"""The `fwbench` command: registers one module per command and turns errors into one line."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
import tempfile
import traceback
from typing import NoReturn

import typer
from pydantic import ValidationError

from fwbench import plugins
from fwbench.case import validation_message
from fwbench.cli import (
    compare,
    env,
    explain,
    export,
    imports,
    models,
    peak,
    report,
    results,
    run,
    serve,
    sweep,
    tune,
)
from fwbench.cli.common import console, raise_deferred, stores, take_deferred
from fwbench.errors import FwbenchError

app = typer.Typer(
    name="fwbench",
    help="Benchmark deep learning frameworks against each other on this machine, fairly.",
    no_args_is_help=True,
    # Help and usage errors in click's plain layout: rich's would show the "[default: ...]"
    # our help texts write as markup (and drop it), and load rich's Markdown and
    # traceback modules before any command answers.
    rich_markup_mode=None,
    add_completion=True,  # --install-completion: choices come from the registries
    pretty_exceptions_enable=False,
    # After the command's own output: an error it deferred (cli.common.defer).
    result_callback=lambda *args, **kwargs: raise_deferred(),
)
# Each command's module, by its name; its `command` function is the command.
COMMANDS = {
    "run": run,
    "sweep": sweep,
    "serve": serve,
    "models": models,
    "env": env,
    "results": results,
    "export": export,
    "import": imports,
    "report": report,
    "peak": peak,
    "compare": compare,
    "explain": explain,
    "tune": tune,
}
for name, module in COMMANDS.items():
    app.command(name)(module.command)


class Terminated(BaseException):
    """SIGTERM, raised where the process is, so `finally` blocks clean up as on Ctrl-C."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated


def _say(text: str) -> None:
    console.print(text, highlight=False, soft_wrap=True, markup=False)


class ClosedStdout(io.TextIOBase):
    """sys.stdout when the command was started with it closed (`>&-`): what a command
    prints there is refused, where Python would drop it (rich) or fail on None (--json),
    and a command that prints nothing there runs as usual."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise FwbenchError(
            "cannot write the output: stdout is closed; send it somewhere, e.g. > out.txt"
        )

    def isatty(self) -> bool:
        return False


def _guard_closed_stdout() -> None:
    """A closed stdout becomes ClosedStdout; its descriptor 1 goes to /dev/null, so that
    no file the command opens (the results database) gets descriptor 1 and with it what
    a library or a worker process writes to stdout."""
    if sys.stdout is not None:
        return
    try:
        os.fstat(1)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        if null != 1:
            os.dup2(null, 1)
            os.close(null)
    sys.stdout = ClosedStdout()


def main() -> None:
    """The one place where any error becomes one line and an exit code: 2 for bad input
    (fwbench's own errors and pydantic's) and for a closed stdout that output was meant
    for, 130/143 when interrupted, 1 for a bug, whose traceback goes to a file that the
    line names. A pipe closed by its reader (`| head -1`) ends the command quietly."""
    signal.signal(signal.SIGTERM, _on_sigterm)
    _guard_closed_stdout()
    try:
        try:
            _check_plugins(sys.argv[1:])
            app()  # standalone: usage errors print click's message and exit 2
        finally:
            # Deferred errors a later error cut off (results kept outside the database
            # when the report then failed too): said before that error's line.
            for deferred in take_deferred():
                _say(f"error: {deferred}")
    except FwbenchError as exc:
        _say(f"error: {exc}")
        sys.exit(exc.exit_code)
    except ValidationError as exc:
        _say(f"error: {validation_message(exc)}")
        sys.exit(2)
    except KeyboardInterrupt:
        _stopped("interrupted", 130)
    except Terminated:
        _stopped("terminated", 143)
    except SystemExit as exc:
        # typer turns Ctrl-C inside a command into a silent exit 130: say it, as above.
        if exc.code == 130 and _caused_by(exc, KeyboardInterrupt):
            _stopped("interrupted", 130)
        raise
    except OSError as exc:
        line = _environment(exc)
        if line is None:
            _unexpected(exc)
        _say(f"error: {line}")
        sys.exit(2)
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("duckdb", "_duckdb") and _damaged(exc):
            why = _first_line(exc)
            _say(f"error: cannot read the results file: {why}; it is damaged or cut short")
            sys.exit(2)
        _unexpected(exc)


def _unexpected(exc: BaseException) -> NoReturn:
    """A bug: one line naming the file that holds its traceback, exit code 1."""
    path = _write_traceback(exc)
    _say(f"error: unexpected {type(exc).__name__}: {exc} (traceback in {path})")
    sys.exit(1)


def _stopped(how: str, code: int) -> None:
    stored = stores()
    kept = (
        ""
        if stored is None
        else " results stored so far are kept (--resume goes on from them)"
        if stored
        else " nothing was stored yet, so no results file is left"
    )
    _say(f"{how}:{kept}" if kept else how)
    sys.exit(code)


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `kind` is in the chain of exceptions that led to `exc`."""
    seen: set[int] = set()
    found: BaseException | None = exc
    while found is not None and id(found) not in seen:
        if isinstance(found, kind):
            return True
        seen.add(id(found))
        found = found.__cause__ or found.__context__
    return False


# What the machine, not fwbench, refused: a full disk, a name too long, a read-only or
# missing place. The user's to fix; one line, exit 2.
_ENVIRONMENT_ERRNOS = {
    errno.ENOSPC,
    errno.EDQUOT,
    errno.ENAMETOOLONG,
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENOENT,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.EIO,
}


def _environment(exc: OSError) -> str | None:
    """The line for an OSError the environment caused, or None (a bug)."""
    if exc.errno not in _ENVIRONMENT_ERRNOS:
        return None
    reason = exc.strerror or str(exc)
    if exc.filename is None:
        return f"cannot write the output: {reason}"  # stdout: `> /dev/full`, a full pipe
    name = str(exc.filename)
    shown = name if len(name) <= 80 else f"{name[:60]}...{name[-12:]}"
    return f"{shown}: {reason}"


def _damaged(exc: BaseException) -> bool:
    text = _first_line(exc).lower()
    return "could not read enough bytes" in text or "not a valid duckdb database" in text


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def _check_plugins(argv: list[str]) -> None:
    """A broken plugin stops every command before it starts, in the line of its error:
    the registries would hold only part of what FWBENCH_PLUGINS names. Help still shows,
    saying which plugin failed."""
    failure = plugins.failure()
    if failure is None:
        return
    if argv and "--help" not in argv:
        raise failure
    app.info.help = f"{app.info.help}\n\nEvery command refuses until this is fixed: {failure}."


def _write_traceback(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    try:
        fd, path = tempfile.mkstemp(prefix="fwbench-crash-", suffix=".log")
        with os.fdopen(fd, "w") as f:
            f.write(" ".join(sys.argv) + "\n" + text)
    except OSError:
        return "unavailable: could not write it"
    return path


if __name__ == "__main__":
    main()
