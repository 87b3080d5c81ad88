"""The generation charts: time per output token (and time to first token) against batch
size, a line per variant and a panel per workload but its batch, with each point's 95%
interval over runs, in the HTML and the Markdown reports; no chart where no variant has
two batch sizes. Synthetic results, no framework."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from fwbench.case import Case
from fwbench.report import generation, html, markdown, png
from fwbench.report.write import write_report
from fwbench.result import Result, RunFigure, StepTime

from .test_parity_and_summary import result, runs_of

_ids = itertools.count()


def generated(
    framework: str,
    mode: str,
    batch: int,
    tpot: float,
    status: str = "ok",
    seq_len: int = 8,
    new_tokens: int = 6,
) -> Result:
    """A generation of three runs: time per output token `tpot` (interval -10%/+20%), time
    to first token ten times it; the step a whole generation."""
    base = result(framework, mode, tpot * new_tokens * 11, tpot, status)
    case = Case.build(
        framework=framework,
        model="gpt2_tiny",
        task="generate",
        mode=mode,
        batch_size=batch,
        seq_len=seq_len,
        task_dims=f"new_tokens={new_tokens}",
        threads=1,
    )
    m = None
    if base.measurement is not None:
        scale = {"tpot_s": 1.0, "ttft_s": 10.0, "tpot_p50_s": 1.0, "tpot_p90_s": 1.5}
        medians = [tpot * 0.95, tpot, tpot * 1.05]
        runs = tuple(
            run.model_copy(
                update={
                    "figures": {
                        name: RunFigure(samples=(v * k,), median_s=v * k)
                        for name, k in scale.items()
                    }
                }
            )
            for run, v in zip(runs_of(medians), medians, strict=True)
        )
        m = base.measurement.model_copy(
            update={
                "runs": runs,
                "figures": {
                    name: StepTime(median=tpot * k, ci_low=tpot * k * 0.9, ci_high=tpot * k * 1.2)
                    for name, k in scale.items()
                },
            }
        )
    return base.model_copy(update={"case": case, "measurement": m, "result_id": f"g{next(_ids)}"})


def two_by_two() -> list[Result]:
    """PyTorch and TensorFlow at batch 1 and 4, and PyTorch out of memory at batch 8."""
    return [
        generated("torch", "eager", 1, 0.020),
        generated("torch", "eager", 4, 0.030),
        generated("torch", "eager", 8, 0.0, status="oom"),
        generated("tensorflow", "graph", 1, 0.025),
        generated("tensorflow", "graph", 4, 0.040),
    ]


def test_time_per_output_token_is_a_line_per_variant_in_ms_with_its_intervals() -> None:
    (panel,) = generation.token_times(two_by_two())
    assert panel.title == "gpt2_tiny, seq8 v512 new6, fp32, cpu t1"
    torch, tf = panel.curves
    assert (torch.variant, tf.variant) == ("torch/eager", "tensorflow/graph")
    assert torch.batch_sizes == tf.batch_sizes == [1, 4]
    assert torch.values == pytest.approx([20.0, 30.0])
    assert tf.values == pytest.approx([25.0, 40.0])
    assert [v for pair in tf.intervals for v in pair] == pytest.approx([22.5, 30.0, 36.0, 48.0])
    minus, plus = tf.error_bars()
    assert minus == pytest.approx([2.5, 4.0]) and plus == pytest.approx([5.0, 8.0])
    # The failed batch size is kept aside, with why, not drawn as a value.
    assert torch.failed == [(8, "oom")] and tf.failed == []


def test_time_to_first_token_is_charted_the_same_way() -> None:
    (panel,) = generation.token_times(two_by_two(), "ttft_s")
    torch, tf = panel.curves
    assert torch.values == pytest.approx([200.0, 300.0])
    assert tf.values == pytest.approx([250.0, 400.0])
    found = generation.charts(two_by_two())
    assert [figure for figure, *_ in found] == ["tpot_s", "ttft_s"]
    assert all("bars are 95% intervals over runs" in caption for _, _, caption, _ in found)


def test_a_panel_per_prompt_and_new_tokens_and_none_with_one_batch_size() -> None:
    results = [
        *two_by_two(),
        # Another prompt length: a panel of its own.
        generated("torch", "eager", 1, 0.021, seq_len=16),
        generated("torch", "eager", 2, 0.022, seq_len=16),
        # Other new tokens, one batch size each: nothing to draw a line through.
        generated("torch", "eager", 1, 0.05, new_tokens=12),
        generated("tensorflow", "graph", 1, 0.06, new_tokens=12),
    ]
    panels = generation.token_times(results)
    assert [p.title for p in panels] == [
        "gpt2_tiny, seq8 v512 new6, fp32, cpu t1",
        "gpt2_tiny, seq16 v512 new6, fp32, cpu t1",
    ]
    assert [c.variant for c in panels[1].curves] == ["torch/eager"]
    assert panels[1].curves[0].values == pytest.approx([21.0, 22.0])
    one_batch = [r for r in results if r.case.batch_size == 1]
    assert generation.token_times(one_batch) == [] and generation.charts(one_batch) == []


def test_a_later_result_of_a_case_replaces_an_earlier_one() -> None:
    (panel,) = generation.token_times([*two_by_two(), generated("torch", "eager", 4, 0.035)])
    assert panel.curves[0].values == pytest.approx([20.0, 35.0])


def test_the_html_report_draws_both_charts_with_error_bars_and_their_captions() -> None:
    page = html.render(two_by_two())
    for title in ("Time per output token vs batch size", "Time to first token vs batch size"):
        assert f"<h2>{title}</h2>" in page
    caption = "Time per output token (the mean decoding step) in ms against batch size"
    assert caption in page and "bars are 95% intervals over runs." in page
    (panel,) = generation.token_times(two_by_two())
    fig = html._curve_figure([panel], "t", "ms", log=True)
    assert list(fig.data[1].error_y.arrayminus) == pytest.approx([2.5, 4.0])
    assert list(fig.data[1].error_y.array) == pytest.approx([5.0, 8.0])
    # One batch size: the table, and no chart.
    single = html.render([r for r in two_by_two() if r.case.batch_size == 1])
    assert "<h2>Generation</h2>" in single and "Time per output token vs batch size" not in single


def test_the_markdown_report_embeds_both_charts_as_png(tmp_path: Path) -> None:
    out = tmp_path / "r.md"
    write_report(two_by_two(), out, "md", "t")
    text = out.read_text()
    charts = dict(re.findall(r"!\[([^\]]*)\]\(<?([^)>]+\.png)>?\)", text))
    tpot = next(c for c in charts if c.startswith("Time per output token"))
    ttft = next(c for c in charts if c.startswith("Time to first token"))
    assert tpot.endswith("bars are 95% intervals over runs.")
    assert charts[tpot] == "r-charts/generation-tpot.png"
    assert charts[ttft] == "r-charts/generation-ttft.png"
    assert all((tmp_path / path).stat().st_size > 1000 for path in charts.values())
    # One batch size: the table, and no chart.
    single = [r for r in two_by_two() if r.case.batch_size == 1]
    assert "## Generation" in markdown.render(single)
    assert not [p for _, p in png.write_charts(single, tmp_path / "one") if "generation" in p.name]
