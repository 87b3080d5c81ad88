"""The HTML report's weight and its charts' reading (issue 43, "which number is which"): a
report of a few results weighed 4.8 MB, nearly all of it plotly.js inlined as it is; the
library now goes in once, compressed, and the file still works offline. Synthetic
results, no framework."""

from __future__ import annotations

import base64
import gzip
import re

import plotly.offline

from fwbench.report import html

from .test_generation_chart import two_by_two
from .test_parity_and_summary import result


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
