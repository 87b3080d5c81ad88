from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from fwbench.studies.trends import downward_trend


def test_a_falling_time_per_sample_is_a_significant_downward_trend() -> None:
    rng = np.random.default_rng(0)
    batches = [1, 8, 32]
    per_sample = [list(0.01 / b**0.5 * rng.lognormal(0, 0.05, 20)) for b in batches]
    trend = downward_trend(batches, per_sample)
    assert trend is not None and trend.p_value < 0.001 and trend.rho < -0.8
    assert trend.describe().startswith("significant downward trend")


def test_a_flat_time_per_sample_is_not() -> None:
    rng = np.random.default_rng(1)
    batches = [1, 8, 32]
    per_sample = [list(0.01 * rng.lognormal(0, 0.05, 20)) for _ in batches]
    trend = downward_trend(batches, per_sample)
    assert trend is not None
    assert trend.describe().startswith("no significant downward trend")
    assert downward_trend([8], [[0.1, 0.2, 0.3, 0.4]]) is None


def test_a_markdown_chart_link_holds_a_path_with_spaces() -> None:
    """Chart links broke when the report's name had a space (issue 43, defect 9)."""
    from fwbench.report.markdown import render

    text = render([], charts=[("Relative training time", "my report-charts/train.png")])
    assert "](<my report-charts/train.png>)" in text


def test_two_precisions_are_two_panels_and_two_bars_never_one() -> None:
    """fp32 (10 ms) and bf16 (5 ms) inference at one batch: each its own curve and its
    own bar; the bf16 point overwrote the fp32 one, under a title naming neither."""
    from fwbench.report.figures import per_sample_time, relative_time

    from .test_parity_and_summary import result

    results = [
        result(fw, mode, t, 0.0004, precision=p, task="infer")
        for fw, mode, t0 in (("torch", "eager", 0.010), ("tensorflow", "graph", 0.012))
        for p, t in ((None, t0), ("bf16", t0 / 2))
    ]
    panels = per_sample_time(results)
    assert sorted(p.title for p in panels) == [
        "resnet18, 224px c1000, cpu",
        "resnet18, 224px c1000, cpu, bf16",
    ]
    (bars,) = relative_time(results, "infer", "cpu")
    assert bars.x == ["b32 224px c1000", "b32 224px c1000 bf16"]
    assert all(len(points) == 2 for points in bars.series.values())


def test_a_trend_over_few_runs_keeps_its_five_percent_on_flat_data() -> None:
    """At the few runs a study has, Spearman's t approximation read 5 values over two
    batch sizes (exact p 0.1) as p 0.029 and a perfect order of 4 as p 0: flat data were
    called a significant trend far more than 5% of the time. By permutation, A/A keeps
    its level."""
    exact = downward_trend([1, 8], [[3.0, 3.1, 3.2], [1.0, 1.1]])
    assert exact is not None and exact.p_value == 0.1
    perfect = downward_trend([1, 8, 64, 128], [[3.0], [2.0], [1.0], [0.5]])
    assert perfect is not None and round(perfect.p_value, 4) == round(1 / 24, 4)
    rng = np.random.default_rng(2)
    for batches, runs in (([1, 8], (3, 2)), ([1, 8, 64, 128], (1, 1, 1, 1)), ([1, 8], (5, 5))):
        found = [
            downward_trend(batches, [list(rng.lognormal(0, 0.05, n)) for n in runs])
            for _ in range(400)
        ]
        called = sum(t is not None and t.p_value < 0.05 and t.rho < 0 for t in found)
        assert called <= 0.05 * 400 + 3 * (0.05 * 0.95 * 400) ** 0.5, (batches, runs, called)


def test_different_work_is_marked_on_the_generation_verdicts_and_the_relative_charts(
    tmp_path: Path,
) -> None:
    """The summary's verdict said DIFFERENT WORK; the generation table's verdicts and the
    relative charts (HTML and PNG), drawn as "fastest = 1.0", said nothing."""
    from fwbench.models.parity import check
    from fwbench.report import figures, generation, html, png

    from .test_parity_and_summary import result
    from .test_regression import _generation

    def gen(framework: str, mode: str, tpot: float) -> Any:
        made = _generation(tpot * 40, tpot, framework)
        case = made.case.model_copy(update={"framework": framework, "mode": mode})
        return made.model_copy(update={"case": case})

    tokens = {"token_check": "failed: 7 of 32 tokens differ"}
    results = [gen("torch", "eager", 0.010), gen("tensorflow", "graph", 0.005)]
    results[1] = results[1].model_copy(update={"settings": tokens})
    (table,) = generation.tables(results)
    verdicts = next(row for row in table.rows if row[3] == "verdict")
    assert verdicts[5].endswith("faster [eager vs compiled] [DIFFERENT WORK]"), verdicts
    differ = check({"torch": 138_357_544, "tensorflow": 43_985_704})
    trained = [
        r.model_copy(update={"parity": differ})
        for r in (result("torch", "eager", 0.15, 0.001), result("tensorflow", "graph", 0.1, 0.001))
    ]
    (panel,) = figures.relative_time(trained, "train", "cpu")
    assert panel.title == "resnet18 [DIFFERENT WORK at b32 224px c1000]"
    assert (
        "resnet18 [DIFFERENT WORK at b32 224px c1000]"
        in html._relative_figure([panel], "t").to_json()
    )
    assert "different work at b32 224px c1000: parameter counts differ" in html._relative_caption(
        [panel]
    )
    ((caption, _),) = png.write_charts(trained, tmp_path)
    assert "; resnet18: different work at b32 224px c1000: parameter counts differ" in caption
