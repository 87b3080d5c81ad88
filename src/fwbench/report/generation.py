"""The generation section of a report (task `generate`): one table of each framework's
time to first token, time per output token and tokens per second, with their 95%
intervals over runs and a verdict on each of the two times, built once from Results and
rendered by the HTML and Markdown reports alike."""

from __future__ import annotations

from collections.abc import Sequence

from fwbench.measure.comparison import Comparison
from fwbench.report.serving import Table
from fwbench.report.summary import SummaryRow, summarise
from fwbench.result import Result, StepTime, comparison_of
from fwbench.tasks import find_task

TASK = "generate"


def _ms(f: StepTime | None) -> str:
    if f is None:
        return "-"
    return f"{f.median * 1e3:.3g} ({f.ci_low * 1e3:.3g}-{f.ci_high * 1e3:.3g})"


def _verdict(row: SummaryRow, figure: str) -> str:
    found: Comparison = comparison_of(row.ok, figure=figure)
    verdict = found.verdict()
    return verdict.short() if verdict is not None else "-"


def tables(results: Sequence[Result]) -> list[Table]:
    """The generation table, or none when no result generated."""
    generated = [r for r in results if r.case.task == TASK]
    task = find_task(TASK)
    if not generated or task is None:
        return []
    _, rows = summarise(generated)
    ttft, tpot, p90 = (task.figure(name).short for name in ("ttft_s", "tpot_s", "tpot_p90_s"))
    head = [
        "model",
        "batch",
        "shape",
        "variant",
        f"{ttft} ms",
        f"{tpot} ms",
        "tokens/s",
        f"{p90} ms",
    ]
    body: list[list[str]] = []
    for row in rows:
        model, _, batch, shape = row.workload[:4]
        tpot, ttft = _verdict(row, "tpot_s"), _verdict(row, "ttft_s")
        for variant, r in row.results.items():
            m = r.measurement
            if m is None:
                body.append([str(model), str(batch), shape, variant, r.status.upper(), "", "", ""])
                continue
            body.append(
                [
                    str(model),
                    str(batch),
                    shape,
                    variant,
                    _ms(m.figures.get("ttft_s")),
                    _ms(m.figures.get("tpot_s")),
                    f"{r.throughput:.4g}" if r.throughput else "-",
                    _ms(m.figures.get("tpot_p90_s")),
                ]
            )
        body.append(["", "", "", "verdict", ttft, tpot, "", ""])
    note = (
        "Time to first token (TTFT: the prompt's prefill and the first token) and time per "
        "output token (TPOT: the mean decoding step after it; p90: its 90th percentile "
        "within a generation), each token read back as it is made, as a streaming server "
        "does. Medians over runs with 95% intervals; tokens/s is the batch's new tokens "
        "over the whole generation. Verdicts compare each time between the fastest variant "
        "and the runner-up."
    )
    return [Table("Generation", note, head, body)]
