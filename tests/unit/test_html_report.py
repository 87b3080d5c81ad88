"""The HTML report's weight and its charts' reading (issue 43, "which number is which"): a
report of a few results weighed 4.8 MB, nearly all of it plotly.js inlined as it is; the
library now goes in once, compressed, and the file still works offline. Synthetic
results, no framework."""

from __future__ import annotations

import base64
import gzip
import re
from html import escape as html_escape
from pathlib import Path

import plotly.offline
import pytest

from fwbench.case import Case
from fwbench.report import figures, generation, html, png
from fwbench.report.terminal import describe_result
from fwbench.result import Result, RunFigure, StepTime
from fwbench.store.db import ResultStore

from .test_generation_chart import generated, two_by_two
from .test_parity_and_summary import result
from .test_robustness import cli


def test_a_report_holds_plotly_once_compressed_and_loads_nothing() -> None:
    results = [
        result("torch", "eager", 0.10, 0.001, task="infer"),
        result("tensorflow", "graph", 0.13, 0.001, task="infer"),
        result("torch", "eager", 0.30, 0.001),
        result("tensorflow", "graph", 0.20, 0.001),
        *two_by_two(),
    ]
    page = html.render(results)
    assert "<script src=" not in page and "<link " not in page  # works offline
    assert page.count("Plotly.newPlot(") >= 4  # each chart's call, queued
    (packed,) = re.findall(r'<script id="fwbench-plotly" type="text/plain">([^<]*)</script>', page)
    assert gzip.decompress(base64.b64decode(packed)).decode() == plotly.offline.get_plotlyjs()
    assert "plotly.js v" not in page  # no uncompressed copy beside it
    # 4.8 MB before (one copy of plotly.js as it is); 2.0 MB now.
    assert len(page.encode()) < 2_300_000


def test_a_report_without_charts_holds_no_library() -> None:
    page = html.render([])
    assert "fwbench-plotly" not in page and "Plotly" not in page


def _nineteen_times() -> list[Result]:
    """torch 19.33x faster at batch 1 (one row of the issue), 1.30x at batch 8."""
    out = []
    for batch, torch_s, tf_s in ((1, 0.05462 / 19.33, 0.05462), (8, 0.010, 0.013)):
        for framework, mode, median in (("torch", "eager", torch_s), ("tensorflow", "graph", tf_s)):
            r = result(framework, mode, median, median * 0.05, task="infer")
            case = Case.build(**{**r.case.model_dump(), "batch_size": batch})
            out.append(r.model_copy(update={"case": case, "result_id": f"{framework}{batch}"}))
    return out


def test_a_bar_past_five_times_is_cut_with_its_value_written_and_the_rest_stay_readable(
    tmp_path: Path,
) -> None:
    (panel,) = figures.relative_time(_nineteen_times(), "infer", "cpu")
    assert panel.cap == figures.RELATIVE_CAP == 5.0
    tf = {p.x: p for p in panel.series["tensorflow/graph"]}
    slow, close = tf["b1 224px c1000"], tf["b8 224px c1000"]
    assert slow.value == pytest.approx(19.33) and panel.cut(slow) and panel.shown(slow) == 5.0
    assert not panel.cut(close) and panel.shown(close) == pytest.approx(1.3)

    fig = html._relative_figure([panel], "t")
    (cut,) = [t for t in fig.data if t.name == "tensorflow/graph (cut)"]
    assert list(cut.y) == [5.0] and list(cut.text) == ["19.3x, cut"] and cut.error_y.array is None
    assert list(cut.customdata) == pytest.approx([19.33])  # the hover says the value
    assert cut.offsetgroup == "tensorflow/graph"  # in its variant's slot
    assert fig.layout.yaxis.range == pytest.approx((0, 5.2))
    page = html.render(_nineteen_times())
    assert "The axis stops at 5x: a bar past it is cut at the top" in page

    charts = dict(png.write_charts(_nineteen_times(), tmp_path))
    assert "Relative inference time, cpu (axis cut at 5x, values written)" in charts

    # Under the cap, nothing is cut and the axis is plotly's own.
    quiet = [r for r in _nineteen_times() if r.case.batch_size == 8]
    (panel,) = figures.relative_time(quiet, "infer", "cpu")
    assert panel.cap is None
    assert html._relative_figure([panel], "t").layout.yaxis.range is None
    assert "The axis stops at" not in html.render(quiet)


def test_the_relative_generation_chart_is_named_for_the_time_per_output_token_it_plots(
    tmp_path: Path,
) -> None:
    results = two_by_two()
    page = html.render(results)
    assert "<h2>Time per output token, relative (cpu)</h2>" in page
    assert "Relative time per output token on cpu" in page
    assert "Generation time, relative" not in page and "Relative generation time" not in page
    charts = [caption for caption, _ in png.write_charts(results, tmp_path)]
    assert "Relative time per output token, cpu" in charts
    (panel,) = figures.relative_time(results, "generate", "cpu")
    tf = {p.x: p for p in panel.series["tensorflow/graph"]}["b1 seq8 v512 new6"]
    assert tf.value == pytest.approx(0.025 / 0.020)  # the time per output token's ratio


def _skewed() -> list[Result]:
    """The issue's torch row: TPOT 3.67 ms beside a median step of 0.88 ms and a p90 of
    9.08 ms, in each of its three runs; TensorFlow's steps alike (TPOT at its p50)."""
    torch = generated("torch", "eager", 1, 3.67e-3)
    tf = generated("tensorflow", "graph", 1, 3.0e-3)
    assert torch.measurement is not None
    scale = {"tpot_p50_s": 0.88 / 3.67, "tpot_p90_s": 9.08 / 3.67}
    runs = tuple(
        run.model_copy(
            update={
                "figures": {
                    **run.figures,
                    **{
                        name: RunFigure(
                            samples=(run.figures["tpot_s"].median_s * k,),
                            median_s=run.figures["tpot_s"].median_s * k,
                        )
                        for name, k in scale.items()
                    },
                }
            }
        )
        for run in torch.measurement.runs
    )
    figures_ = dict(torch.measurement.figures)
    for name, k in scale.items():
        t = figures_["tpot_s"]
        figures_[name] = StepTime(median=t.median * k, ci_low=t.ci_low * k, ci_high=t.ci_high * k)
    m = torch.measurement.model_copy(update={"runs": runs, "figures": figures_})
    return [torch.model_copy(update={"measurement": m}), tf]


def test_the_generation_table_says_which_time_per_token_is_the_one_and_why_they_differ(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (table,) = generation.tables(_skewed())
    assert table.head[4:] == [
        "TTFT ms", "TPOT ms (mean step)", "tokens/s", "TPOT p50 ms", "TPOT p90 ms",
    ]  # fmt: skip
    torch = next(row for row in table.rows if row[3] == "torch/eager")
    tpot, p50, p90 = (torch[i].split(" (")[0] for i in (5, 7, 8))
    assert (tpot, p50, p90) == ("3.67", "0.879", "9.07")  # each run's, over the runs
    assert generation.WHICH_IS_WHICH in table.note
    assert "TPOT, the time per output token, is the mean of a generation's decoding steps" in (
        table.note
    )
    said = (
        "torch/eager b1 seq8 v512 new6: time per output token 3.67 ms = 4.2x the median "
        "step 0.879 ms: a tenth of the steps took 9.07 ms or more (p90), and the mean counts "
        "them."
    )
    assert said in table.note
    assert "tensorflow/graph b1 seq8 v512 new6: time per output token" not in table.note

    # The HTML report's table and the terminal's say it alike.
    assert html_escape(said) in html.render(_skewed())
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        for r in _skewed():
            store.add(r)
    code, out, err = cli(["results", "--db", str(db), "--summary"], capsys)
    assert code == 0, err
    flat = " ".join(out.split())
    assert "TPOT ms (mean step)" in flat and " ".join(said.split()) in flat
    assert " ".join(generation.WHICH_IS_WHICH.split()) in flat
    # A run's own lines name the mean, and say why it is above the median step.
    lines = describe_result(_skewed()[0])
    assert "time per output token (the mean of a generation's decoding steps): 3.670 ms" in lines
    assert "median decoding step within a generation: 0.880 ms" in lines
    assert "time per output token 3.67 ms = 4.2x the median step 0.88 ms" in lines
    assert "the median step" not in describe_result(_skewed()[1])  # TPOT at its p50
