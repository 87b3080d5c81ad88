"""A Markdown report of stored results: summary table, failures, environment."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from fwbench.measure.verdicts import ESTIMATOR_TEXT
from fwbench.report import generation, scaling, warnings
from fwbench.report.answer import opening
from fwbench.report.serving import tables as serving_tables
from fwbench.report.summary import (
    estimator_of,
    summarise,
    verdict_notes,
    workload_cells,
    workload_head,
)
from fwbench.result import Result, cases_and_points
from fwbench.studies.claims import load_study, reproduction_table

# A backslash, brackets and asterisks too: a backslash before a pipe would split the
# cell; "[text](url)" would be a live link, "![](url)" a remote image, "*" emphasis.
_ESCAPES = str.maketrans(
    {
        "\\": "\\\\",
        "|": "\\|",
        "<": "&lt;",
        ">": "&gt;",
        "&": "&amp;",
        "`": "\\`",
        "[": "\\[",
        "]": "\\]",
        "*": "\\*",
    }
)


def md(text: object) -> str:
    """Text from a sweep file or a results file, safe in Markdown: no HTML, no table
    breaks, one line."""
    return " ".join(str(text).translate(_ESCAPES).split())


def _code(text: object) -> str:
    """Inline code: its content is literal, but a backtick would end it."""
    return "`" + " ".join(str(text).replace("`", "'").split()) + "`"


def render(
    results: Sequence[Result],
    title: str = "fwbench report",
    charts: Sequence[tuple[str, str]] = (),
    study: str | None = None,
    band: float | None = None,
) -> str:
    """Markdown of cases' and serving points' results (the points make the serving
    scenarios' tables); `charts` are (caption, relative path of a PNG) pairs to embed;
    `study` adds that study's reproduction table; `band`: the band verdicts read instead
    of the one the results recorded."""
    results, serving = cases_and_points(results)
    variants, rows = summarise(results, band)
    counted = f"{len(results)} results" + (f", {len(serving)} serving points" if serving else "")
    out = [f"# {md(title)}", ""]
    if results:
        # The answer first, one line per comparison (our words, from md-safe names).
        out += [f"- {md(line)}" for line in opening(results, rows)] + [""]
    out += [
        f"Generated {datetime.now():%Y-%m-%d %H:%M} from {counted}; how each figure and verdict "
        "is read: *How to read this*, after the charts.",
        "",
    ]
    for table in [*serving_tables(serving, band), *generation.tables(results, band)]:
        out += [f"## {table.heading}", "", table.note, ""]  # our own words
        out += ["| " + " | ".join(table.head) + " |", "|" + "---|" * len(table.head)]
        out += ["| " + " | ".join(md(c) for c in row) + " |" for row in table.rows]
        out.append("")
    if results:
        if serving:
            out += ["## Step times", ""]
        estimator = estimator_of(rows)
        value = ESTIMATOR_TEXT[estimator] if estimator else "the value named under the table"
        out += [
            "Each case's step time as its verdict reads it, in milliseconds: the geometric",
            f"mean over runs of {value}, with its 95% interval, and relative to the fastest",
            "framework for the same work (x1.00 = fastest; for the runner-up, the verdict's",
            "own ratio). Each case's median step time is in its record (`fwbench export`).",
            "",
        ]
        names = workload_head(rows)
        head = [*names, *(md(v) for v in variants), "verdict"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for row in rows:
            cells = [md(c) for c in workload_cells(row, names)]
            cells += [md(row.cell(v)) for v in variants]
            out.append("| " + " | ".join(cells) + f" | {md(row.verdict())} |")
    scaled = scaling.scaling(results)
    if scaled:
        head, body = scaling.rows(scaled)
        out += [
            "",
            "## Data-parallel scaling",
            "",
            "Efficiency = throughput(N) / (N x throughput(1)) = t1 / tN at a fixed per-replica",
            "batch, against the same strategy at one worker (95% CI over runs).",
            scaling.READ,
            "",
            "| " + " | ".join(head) + " |",
            "|" + "---|" * len(head),
        ]
        out += ["| " + " | ".join(md(c) for c in row) + " |" for row in body]
    if study:
        found = load_study(study)
        head, body = reproduction_table(found, results)
        out += ["", f"## Reproduction: {md(found.title)}", ""]
        out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(md(c) for c in row) + " |" for row in body]
    for caption, path in charts:
        # In angle brackets: a path with spaces (a report named "my report.md") is still
        # one link target (CommonMark).
        out += ["", f"![{md(caption)}](<{path}>)"]
    notes = verdict_notes(rows)
    if notes:
        out += ["", "## How to read this"]
        for note in notes:
            out += ["", note]  # our own words: no escaping
    failures = [r for r in results if r.status != "ok"]
    if failures:
        out += ["", "## Cases without a measurement", ""]
        out += [f"- {_code(r.case.label())}: **{r.status}**: {md(r.error)}" for r in failures]
    grouped = warnings.group((r.case.label(), w) for r in results for w in r.warnings)
    if grouped:
        out += ["", "## Warnings", ""]
        out += [f"- {md(g.text())} ({md(g.where())})" for g in grouped]
    out += ["", "## Environment", ""]
    seen: set[str] = set()
    recorded = [*results, *serving]
    for r in recorded:
        env = json.dumps({"framework": r.case.framework, **r.environment}, sort_keys=True)
        if env not in seen:
            seen.add(env)
            out += ["```json", json.dumps(json.loads(env), indent=2), "```"]
    settings = {r.case.variant: r.settings for r in results if r.status == "ok"}
    if settings:
        out += [
            "",
            "## Settings per framework",
            "",
            "```json",
            json.dumps(settings, indent=2, default=str),
            "```",
        ]
    return "\n".join(out) + "\n"
