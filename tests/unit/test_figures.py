from __future__ import annotations

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
