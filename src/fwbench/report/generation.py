"""The generation section of a report (task `generate`): one table of each framework's
time to first token, time per output token and tokens per second, with their 95%
intervals over runs and a verdict on each of the two times, and the charts of those two
times against batch size, built once from Results and rendered by the HTML and Markdown
reports alike."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fwbench.measure.verdicts import ESTIMATOR_TEXT, Comparison, comparison_of
from fwbench.report.figures import Curve, CurvePanel
from fwbench.report.serving import Table
from fwbench.report.summary import Shown, SummaryRow, shown, summarise
from fwbench.result import Result
from fwbench.tasks import find_task
from fwbench.tasks.generate import GENERATE

TASK = GENERATE.name


# The figures of the table, each shown as its verdict reads it.
_FIGURES = ("ttft_s", "tpot_s", "tpot_p50_s", "tpot_p90_s")

# Where time per output token (the mean step) is this far above the median step, some of
# a generation's steps are much slower than its typical one: said with the numbers.
SKEWED = 1.25

# Which of a generation's times per token is "the" one, and why the others differ: said
# under the table and beside a run's figures (cli), in the same words.
WHICH_IS_WHICH = (
    "TPOT, the time per output token, is the mean of a generation's decoding steps: "
    "the new tokens times TPOT is how long its answer streams after the first token, so it "
    "is the time per token that tokens/s and the verdicts follow. The p50 and p90 are the "
    "median and the 90th-percentile step within a generation (the typical step and the "
    "slow tenth). TPOT above p50 means a few steps are much slower than the typical one "
    "(p90 says how slow): a reader waiting for the answer waits for them too."
)


def _ms(figure: Shown | None) -> str:
    if figure is None:
        return "-"
    if figure.interval is None:
        return f"{figure.value * 1e3:.3g} ({figure.runs} run)"
    low, high = figure.interval
    return f"{figure.value * 1e3:.3g} ({low * 1e3:.3g}-{high * 1e3:.3g})"


def _rate(x: float | None) -> str:
    # 14,080, not 1.408e+04: a batch's tokens per second run to tens of thousands.
    if not x:
        return "-"
    return f"{x:,.0f}" if x >= 1000 else f"{x:.4g}"


def skewed(tpot: float, p50: float | None, p90: float | None) -> str | None:
    """Why a time per output token `tpot` is well above its median step `p50`, with the
    numbers (seconds), or None where they are close (or the median is unknown)."""
    if p50 is None or p50 <= 0 or tpot < SKEWED * p50:
        return None
    slow = f"a tenth of the steps took {p90 * 1e3:.3g} ms or more (p90)" if p90 else ""
    return (
        f"time per output token {tpot * 1e3:.3g} ms = {tpot / p50:.1f}x the median step "
        f"{p50 * 1e3:.3g} ms: {slow or 'some steps are slow'}, and the mean counts them"
    )


def skew(r: Result) -> str | None:
    """`skewed` for a generation's own figures (its medians over runs, as a run's lines
    print them), or None."""
    m = r.measurement
    if m is None or r.case.task != TASK or "tpot_s" not in m.figures:
        return None
    p50, p90 = (m.figures.get(n) for n in ("tpot_p50_s", "tpot_p90_s"))
    return skewed(
        m.figures["tpot_s"].median,
        p50.median if p50 else None,
        p90.median if p90 else None,
    )


def _compared(row: SummaryRow, figure: str, band: float | None) -> Comparison:
    """The row's variants that have `figure`, compared on it."""
    have = {v: r for v, r in row.ok.items() if r.measurement and figure in r.measurement.figures}
    return comparison_of(have, band=band, figure=figure)


def tables(results: Sequence[Result], band: float | None = None) -> list[Table]:
    """The generation table, or none when no result generated; `band`: the band its
    verdicts read instead of the recorded one."""
    generated = [r for r in results if r.case.task == TASK]
    task = find_task(TASK)
    if not generated or task is None:
        return []
    _, rows = summarise(generated, band)
    ttft, tpot, p50, p90 = (task.figure(name).short for name in _FIGURES)
    head = [
        "model",
        "batch",
        "shape",
        "variant",
        f"{ttft} ms",
        f"{tpot} ms (mean step)",
        "tokens/s",
        f"{p50} ms",
        f"{p90} ms",
    ]
    body: list[list[str]] = []
    estimators: set[str] = set()
    skews: list[str] = []
    looped: list[str] = []
    for row in rows:
        model, _, batch, shape = row.workload[:4]
        compared = {name: _compared(row, name, band) for name in _FIGURES}
        estimators |= {c.estimator for c in compared.values() if c.variants}
        verdicts = {
            name: row.marked(v, short=True) if (v := compared[name].verdict()) is not None else "-"
            for name in ("ttft_s", "tpot_s")
        }
        for variant, r in row.results.items():
            if r.measurement is None:
                body.append([str(model), str(batch), shape, variant, r.status.upper(), *[""] * 4])
                continue
            seen = {name: shown(r, compared[name], variant) for name in _FIGURES}
            cells = {name: _ms(found) for name, found in seen.items()}
            body.append(
                [
                    str(model),
                    str(batch),
                    shape,
                    variant,
                    cells["ttft_s"],
                    cells["tpot_s"],
                    _rate(r.throughput),
                    cells["tpot_p50_s"],
                    cells["tpot_p90_s"],
                ]
            )
            # Said with the numbers the row shows.
            value = {n: found.value if found else None for n, found in seen.items()}
            mean = value["tpot_s"]
            why = skewed(mean, value["tpot_p50_s"], value["tpot_p90_s"]) if mean else None
            if why is not None:
                skews.append(f"{variant} b{batch} {shape}: {why}.")
            if r.case.option_values.get("decoding") == "loop":
                looped.append(variant)
        body.append(["", "", "", "verdict", verdicts["ttft_s"], verdicts["tpot_s"], "", "", ""])
    read = " / ".join(ESTIMATOR_TEXT[e] for e in sorted(estimators)) or ESTIMATOR_TEXT["median"]
    loops = (
        [
            f"{', '.join(dict.fromkeys(looped))} (decoding=loop) ran every decoding step in "
            "one compiled loop, its tokens read back at the end, as keras-hub's generate() "
            "does: its TPOT is the loop's time over its steps, no step is timed alone (no "
            "p50 or p90), and no token streams before the last."
        ]
        if looped
        else []
    )
    note = " ".join(
        [
            "Time to first token (TTFT: the prompt's prefill and the first token), then "
            "each later token's decoding step, each token read back as it is made, as a "
            "streaming server does. " + WHICH_IS_WHICH,
            *loops,
            *skews,
            f"Each time as its verdict reads it: {read}, its geometric mean over runs with a "
            "95% interval; tokens/s is the batch's new tokens over the whole generation at "
            "the median step. Verdicts compare TTFT and TPOT between the fastest variant "
            "and the runner-up.",
        ]
    )
    return [Table("Generation", note, head, body)]


# Each chart: the figure it plots, its title, and its caption (HTML and Markdown alike).
_CHARTS = (
    (
        "tpot_s",
        "Time per output token vs batch size",
        "Time per output token (the mean decoding step) in ms against batch size, a line "
        "per variant; bars are 95% intervals over runs.",
    ),
    (
        "ttft_s",
        "Time to first token vs batch size",
        "Time to first token (the prompt's prefill and the first token) in ms against batch "
        "size, a line per variant; bars are 95% intervals over runs.",
    ),
)


def charts(results: Sequence[Result]) -> list[tuple[str, str, str, list[CurvePanel]]]:
    """The generation charts with something to draw: (figure, title, caption, panels)."""
    out = []
    for figure, title, caption in _CHARTS:
        panels = token_times(results, figure)
        if panels:
            out.append((figure, title, caption, panels))
    return out


def token_times(results: Sequence[Result], figure: str = "tpot_s") -> list[CurvePanel]:
    """A generation figure (time per output token; `ttft_s`: time to first token) in ms
    against batch size, with each point's 95% interval over runs: a panel per workload
    but its batch (model, prompt and new tokens, precision, device, threads), a curve per
    variant. A panel is kept only where some variant has two batch sizes or more: one
    batch size is the table's row, with nothing to draw a line through."""
    by_workload: dict[tuple[Any, ...], dict[str, dict[int, Result]]] = {}
    titles: dict[tuple[Any, ...], str] = {}
    for r in results:
        if r.case.task != TASK:
            continue
        c = r.case
        whole = c.workload_key()
        key = (*whole[:2], *whole[3:])  # all but the batch (Case.workload_key's third)
        precision = c.precision or "fp32"
        titles.setdefault(key, f"{whole[0]}, {c.shape}, {precision}, {c.device} t{c.threads}")
        # A later result of a case replaces an earlier one.
        by_workload.setdefault(key, {}).setdefault(c.variant, {})[c.batch_size] = r
    panels = []
    for key, by_variant in by_workload.items():
        curves = [_curve(variant, by_batch, figure) for variant, by_batch in by_variant.items()]
        if any(len(curve.values) >= 2 for curve in curves):
            panels.append(CurvePanel(titles[key], curves))
    return panels


def _curve(variant: str, by_batch: dict[int, Result], figure: str) -> Curve:
    curve = Curve(variant, [], [], [])
    for b in sorted(by_batch):
        r = by_batch[b]
        found = r.measurement.figures.get(figure) if r.measurement is not None else None
        if found is None:
            curve.failed.append((b, r.status if r.status != "ok" else "not measured"))
            continue
        curve.batch_sizes.append(b)
        curve.values.append(found.median * 1e3)
        curve.intervals.append((found.ci_low * 1e3, found.ci_high * 1e3))
    return curve
