"""Reports and compare, built from real stored results of a tiny sweep."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.measure.verdicts import comparison_of
from fwbench.report.summary import summarise, verdict_notes
from fwbench.result import Result, StepTime
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING, fwbench

ARTIFACTS = Path(os.environ.get("FWBENCH_ARTIFACTS", "test-artifacts"))


def _case(fw: str, task: str, batch: int, size: int) -> Case:
    return Case.build(
        framework=fw,
        model="resnet18",
        task=task,
        batch_size=batch,
        input_size=size,
        num_classes=10,
        mode="graph" if fw == "tensorflow" else "eager",
        threads=1,
    )


@pytest.fixture(scope="module")
def sweep_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("report") / "results.duckdb"
    cases = [
        _case(fw, task, batch, size)
        for task, batch, size in (
            ("infer", 1, 32),
            ("infer", 2, 32),
            ("infer", 1_000_000, 224),  # out of memory in both frameworks
            ("train", 2, 32),
        )
        for fw in ("torch", "tensorflow")
    ]
    with ResultStore(db) as store:
        # Two runs a case: verdicts and the per-sample trend are built over runs.
        timing = FAST_TIMING.replace(min_runs=2, max_runs=2)
        options = RunOptions(timing=timing, interleave=True, count_flops=False)
        results = list(run_cases(cases, store, "report-test", options))
    assert [r.status for r in results].count("oom") == 2
    return db


def _stored(db: Path) -> list[Result]:
    with ResultStore(db, read_only=True) as store:
        return store.results()


def test_variants_measured_together_share_a_group_and_their_verdicts_pair_runs(
    sweep_db: Path,
) -> None:
    results = [r for r in _stored(sweep_db) if r.measurement is not None]
    by_workload: dict[tuple[object, ...], list[Result]] = {}
    for r in results:
        by_workload.setdefault(r.case.workload_key(), []).append(r)
    groups = set()
    for found in by_workload.values():
        assert len(found) == 2
        ids = {r.measurement.group_id for r in found if r.measurement}
        assert len(ids) == 1 and None not in ids  # one group: the two frameworks, round by round
        groups |= ids
        assert [run.index for run in found[0].measurement.runs] == [0, 1]  # type: ignore[union-attr]
        assert comparison_of({r.case.framework: r for r in found}).paired
    assert len(groups) == len(by_workload)  # each workload its own group
    _, rows = summarise(results)
    assert any("pair the variants' runs round by round" in n for n in verdict_notes(rows))


def test_html_report_has_every_case_the_gaps_and_the_stored_ratios(
    sweep_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "report.html"
    proc = fwbench("report", str(sweep_db), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "<script src=" not in page and "<link " not in page  # works offline
    results = _stored(sweep_db)
    for r in results:
        if r.status != "ok":
            assert r.case.label() in page  # listed with its reason
    assert page.count(">oom<") == 2
    assert '"OOM"' in page  # the gap is marked in the chart itself
    _, rows = summarise(results)
    for row in rows:
        for variant in row.ok:
            rel = row.relative(variant)
            assert rel is not None
            assert f"x{rel:.2f}" in page
    assert "Energy: not measured on this machine" in page or "Energy per sample" in page
    assert "significant downward trend" in page or "no significant downward trend" in page


def test_markdown_report_embeds_png_charts(sweep_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "summary.md"
    proc = fwbench("report", str(sweep_db), "--format", "md", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    charts = re.findall(r"!\[[^\]]*\]\(<?([^)>]+\.png)>?\)", text)
    assert charts and all((tmp_path / c).stat().st_size > 1000 for c in charts)
    assert "| resnet18 | infer | 2 | 32px c10 |" in text
    assert "**oom**" in text


def test_report_with_a_study_adds_its_reproduction_table(sweep_db: Path, tmp_path: Path) -> None:
    """A real 2-framework run (torch and TensorFlow inference on the CPU) against the
    Arizona State study's claims: the CPU inference claim and the per-sample trend are
    evaluated from these results, the GPU and training-grid claims are not measured."""
    out = tmp_path / "report.md"
    proc = fwbench("report", str(sweep_db), "-o", str(out), "--study", "asu")
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert "## Reproduction: PyTorch vs TensorFlow and Other Insights" in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()}
    assert set(rows) >= {"train-pytorch", "infer-cpu", "per-sample-trend", "ddp-beats-dp"}
    assert "not measured here: no result matches" in rows["train-tensorflow"]  # no vgg16
    assert "not measured here: no result matches" in rows["power-flat"]  # device cuda
    infer = rows["infer-cpu"]
    assert any(o in infer for o in (" agrees", " disagrees", " inconclusive"))
    assert "of 2 agree" in infer  # batch 1 and 2 at 32 px, each a verdict over runs
    html = tmp_path / "report.html"
    assert fwbench("report", str(sweep_db), "-o", str(html), "--study", "asu").returncode == 0
    assert "Reproduction: PyTorch vs TensorFlow" in html.read_text()
    bad = fwbench("report", str(sweep_db), "-o", str(tmp_path / "x.md"), "--study", "nope")
    assert bad.returncode == 2 and "valid choices: asu, dai" in bad.stderr
    assert not (tmp_path / "x.md").exists()


def test_html_report_renders_in_a_real_browser(sweep_db: Path, tmp_path: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("no chromium on this machine: `make test` installs it where it can (root)")
    from playwright.sync_api import sync_playwright

    out = tmp_path / "report.html"
    assert fwbench("report", str(sweep_db), "-o", str(out)).returncode == 0
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=chromium,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(out.as_uri())
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=30_000)
        charts = page.locator(".js-plotly-plot").count()
        rendered = page.locator(".js-plotly-plot .main-svg").count()
        bars = page.locator(".js-plotly-plot .point").count()
        # The answer first (issue 54): after the title, one sentence per comparison (a
        # busy machine's line may come before them), each with its verdict and interval.
        lines = [line for line in page.inner_text("body").splitlines() if line.strip()]
        opening = page.locator("section.answer p").all_inner_texts()
        answers = page.locator("section.answer p.verdict").all_inner_texts()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "report.png"), full_page=True)
        browser.close()
    assert errors == []
    assert lines[1 : 1 + len(opening)] == opening
    assert len(answers) == 4, answers  # infer b1, infer b2, the oom pair, train b2
    measured = [a for a in answers if "nothing measured" not in a]
    assert len(measured) == 3, answers
    for answer in measured:
        assert answer.startswith("ResNet-18 ") and "interval" in answer, answer
        assert any(w in answer for w in (" faster than ", "no difference", "undecided")), answer
    assert charts >= 4  # train, infer, per-sample, memory
    assert rendered >= charts
    assert bars > 0
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000


def _slowed(r: Result, factor: float, suffix: str = "x") -> Result:
    """The result with three quiet runs around its median times `factor`: the gate is
    tested on a known change, not on this machine's noise of the day."""
    m = r.measurement
    assert m is not None and m.runs
    st = m.step_time_s
    runs = tuple(
        run.model_copy(
            update={
                "index": i,
                "median_s": st.median * factor * f,
                "ci_low_s": st.median * factor * f * 0.99,
                "ci_high_s": st.median * factor * f * 1.01,
                # Its blocks moved with it: a verdict may read a quantile of them.
                "samples": tuple(x * st.median * factor * f / run.median_s for x in run.samples),
            }
        )
        for i, (run, f) in enumerate(zip([m.runs[0]] * 3, (0.995, 1.0, 1.005), strict=True))
    )
    m = m.model_copy(
        update={
            "samples": tuple(x * factor for x in m.samples),
            "runs": runs,
            "step_time_s": StepTime(
                median=st.median * factor, ci_low=st.ci_low * factor, ci_high=st.ci_high * factor
            ),
        }
    )
    return r.model_copy(update={"measurement": m, "result_id": r.result_id + suffix})


def _write(results: list[Result], db: Path) -> Path:
    with ResultStore(db) as store:
        for r in results:
            store.add(r)
    return db


def test_compare_finds_an_injected_20_percent_slowdown(sweep_db: Path, tmp_path: Path) -> None:
    results = _stored(sweep_db)
    measured = [r for r in results if r.measurement is not None]

    def samples(r: Result) -> int:
        assert r.measurement is not None
        return len(r.measurement.samples)

    # Slow down the best-sampled case by 20%; every other case is unchanged.
    victim = max(measured, key=samples)
    new = [_slowed(r, 1.2) if r is victim else _slowed(r, 1.0) for r in results if r.measurement]
    new += [
        r.model_copy(update={"result_id": r.result_id + "x"}) for r in results if not r.measurement
    ]
    slower = _write(new, tmp_path / "slower.duckdb")
    base = _write(
        [_slowed(r, 1.0, "b") if r.measurement else r for r in results], tmp_path / "b.duckdb"
    )
    proc = fwbench("compare", str(base), str(slower), "--json")
    assert proc.returncode == 1, proc.stderr
    found = json.loads(proc.stdout)
    assert found[0]["case"] == victim.case.label()
    assert found[0]["kind"] == "regression" and found[0]["ratio"] == pytest.approx(1.2)
    assert [c["kind"] for c in found].count("regression") == 1
    assert {c["kind"] for c in found[1:]} == {"unchanged"}

    same = _write(
        [r.model_copy(update={"result_id": r.result_id + "y"}) for r in results],
        tmp_path / "same.duckdb",
    )
    proc = fwbench("compare", str(sweep_db), str(same))
    assert proc.returncode == 0, proc.stderr
    assert "no significant regression" in proc.stderr
