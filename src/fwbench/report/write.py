"""Write a report file (HTML or Markdown with its PNG charts) atomically."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

from fwbench.errors import SpecError
from fwbench.report import html, markdown, png
from fwbench.result import Result

FORMATS = ("html", "md")


def report_format(output: Path | None, fmt: str | None) -> str:
    found = fmt or (output.suffix.lstrip(".").lower() if output and output.suffix else "html")
    if found not in FORMATS:
        raise SpecError(f"unknown report format {found!r}; valid choices: {', '.join(FORMATS)}")
    return found


def write_report(results: Sequence[Result], output: Path, fmt: str, title: str) -> None:
    """A failure leaves no half-written report: everything is built aside, then moved."""
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=output.parent) as tmp:
        scratch = Path(tmp) / output.name
        if fmt == "html":
            scratch.write_text(html.render(results, title=title))
        else:
            chart_dir = f"{output.stem}-charts"
            charts = png.write_charts(results, Path(tmp) / chart_dir)
            rel = [(caption, f"{chart_dir}/{path.name}") for caption, path in charts]
            scratch.write_text(markdown.render(results, title=title, charts=rel))
            final_charts = output.parent / chart_dir
            if final_charts.exists():
                shutil.rmtree(final_charts)
            if charts:
                (Path(tmp) / chart_dir).replace(final_charts)
        scratch.replace(output)
