"""Write a report file (HTML or Markdown with its PNG charts) atomically."""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from fwbench.errors import SpecError
from fwbench.outputs import check_output, is_special, report_output, write_atomically

if TYPE_CHECKING:
    from fwbench.result import Result

FORMATS = ("html", "md")


def report_format(
    output: Path | None, fmt: str | None, flag: str = "--report", format_flag: bool = False
) -> str:
    """The format of a report: --format, else the extension of its path (`flag`), else
    html where no path is given (the default report.html). A file path with no extension
    is refused, as `export` refuses it: it would get HTML without saying so. A special
    file (`/dev/stdout`, a FIFO) or a folder takes html: the one format that is a single
    file (a folder is then refused by check_report_path)."""
    suffix = output.suffix.lstrip(".").lower() if output and output.suffix else ""
    if output is not None and not fmt and not suffix and not is_special(output):
        how = ", or give --format html|md" if format_flag else ""
        raise SpecError(
            f"{flag} {output}: no extension to tell the report's format; valid extensions: "
            f".html, .md (e.g. {output.name}.html){how}"
        )
    found = fmt or suffix or "html"
    if found not in FORMATS:
        raise SpecError(f"unknown report format {found!r}; valid choices: {', '.join(FORMATS)}")
    if fmt and suffix in FORMATS and suffix != fmt:
        raise SpecError(f"-o {output} says .{suffix} but --format says {fmt}; make them agree")
    return found


def check_report_path(output: Path, fmt: str) -> None:
    """Before a sweep runs: the report can be written where asked (a Markdown report's
    charts too, in the folder beside it that it replaces)."""
    check_output(output, "report")
    if fmt != "md":
        return
    if is_special(output):
        raise SpecError(
            f"report {output}: a Markdown report writes PNG charts beside its file; give a "
            "file path (or use --format html, one self-contained file)"
        )
    charts = _charts_folder(output)
    if charts.is_symlink() or (charts.exists() and not charts.is_dir()):
        what = "a link" if charts.is_symlink() else "not a folder"
        raise SpecError(
            f"report {output}: its charts go in {charts}, which is {what}; remove it or give "
            "the report another name"
        )


def _charts_folder(output: Path) -> Path:
    """Where a Markdown report's charts go: `<name>-charts` beside it."""
    folder = report_output("--report", output, "md").folder
    assert folder is not None, output  # a special file is refused before
    return folder


def write_report(
    results: Sequence[Result],
    output: Path,
    fmt: str,
    title: str,
    study: str | None = None,
    band: float | None = None,
) -> None:
    """A failure leaves no half-written report: everything is built aside, then moved.

    `results`: cases' and serving points' alike; the points make the serving
    scenarios' tables and curve (fwbench.report.serving). With `study`, the report adds
    that study's reproduction table (fwbench.studies); with `band`, verdicts read that
    band instead of the one the results recorded."""
    # The renderers load here: plotly and matplotlib are for writing a report, and a
    # command that only checks its report path (before a sweep) starts without them.
    from fwbench.report import html, markdown, png
    from fwbench.result import cases_and_points

    check_report_path(output, fmt)
    if fmt == "html":
        page = html.render(results, title=title, study=study, band=band)
        write_atomically(output, lambda tmp: _write(tmp, page), "report")
        return
    final_charts = _charts_folder(output)
    chart_dir = final_charts.name
    # The charts are built in a scratch folder beside the report: its folder must exist
    # first (write_atomically makes it for the HTML report the same way).
    final_charts.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final_charts.parent) as tmp:
        charts = png.write_charts(cases_and_points(results)[0], Path(tmp) / chart_dir)
        rel = [(caption, f"{chart_dir}/{path.name}") for caption, path in charts]
        text = markdown.render(results, title=title, charts=rel, study=study, band=band)
        # The charts first, the text last: a report is never published beside charts
        # it names and that are not there. The old charts leave with the scratch folder.
        if final_charts.exists():
            final_charts.replace(Path(tmp) / "replaced")
        if charts:
            (Path(tmp) / chart_dir).replace(final_charts)
        write_atomically(output, lambda scratch: _write(scratch, text), "report")


def _write(path: Path, text: str) -> None:
    path.write_text(text)
