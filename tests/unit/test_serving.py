"""Serving scenarios: settings, LoadGen's log, the rate search, the record over runs,
storage and reports. Pure parts here; the real CLI in tests/e2e/test_serve.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from fwbench import sweep
from fwbench.case import Case
from fwbench.errors import SpecError
from fwbench.launch.serving import Point, build_result
from fwbench.report import markdown
from fwbench.report.html import render
from fwbench.result import Result
from fwbench.scenario.record import LoadGenTest, ServingRun
from fwbench.scenario.spec import ServeSpec, min_queries, point_key
from fwbench.serve.loadgen import figures_from_log, fitting, ladder, read_detail_log, search
from fwbench.store.db import ResultStore

DATA = Path(__file__).parents[1] / "data"


def case(framework: str = "torch", batch: int = 4) -> Case:
    return Case.build(
        framework=framework, model="resnet18", task="infer", batch_size=batch, input_size=32,
        num_classes=10, threads=1,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"scenario": "batch"}, "scenario: invalid value 'batch'; valid choices"),
        ({"scenario": "server", "target_qps": 0}, "target_qps: Input should be greater than 0"),
        ({"scenario": "server", "target_qps": float("nan")}, "target_qps"),
        ({"scenario": "server", "latency_bound_ms": -1}, "latency_bound_ms"),
        ({"scenario": "server", "percentile": 1.0}, "percentile"),
        ({"scenario": "offline", "target_qps": 5}, "target_qps: applies to the server scenario"),
        ({"scenario": "server", "target_qps": 5, "search_steps": 3}, "search_steps: a fixed"),
        ({"scenario": "single_stream", "duration_s": 0}, "duration_s"),
        ({"scenario": "server", "qps": 5}, "unknown key 'qps'"),
    ],
)
def test_bad_settings_are_one_line_naming_the_setting(fields: dict, message: str) -> None:
    with pytest.raises(SpecError, match=message) as found:
        ServeSpec.build(**fields)
    assert "\n" not in str(found.value) and str(found.value).startswith("serve: ")


def test_scenario_names_as_mlperf_spells_them_are_accepted() -> None:
    assert ServeSpec.build(scenario="SingleStream").scenario == "single_stream"
    assert ServeSpec.build(scenario="Server").searches
    assert not ServeSpec.build(scenario="server", target_qps=10).searches


def test_early_stopping_minimum_matches_loadgen() -> None:
    # LoadGen's own summary: "Would need to run at least 269 more queries" after 190 (p99).
    assert min_queries(0.99) == 459
    assert min_queries(0.90) == 44


def test_the_batcher_builds_powers_of_two_and_pads_up() -> None:
    assert ladder(8, "server") == [1, 2, 4, 8]
    assert ladder(6, "server") == [1, 2, 4, 6]
    assert ladder(6, "offline") == [6] and ladder(1, "server") == [1]
    assert [fitting([1, 2, 4, 6], n) for n in (1, 2, 3, 5, 6)] == [1, 2, 4, 6, 6]


def test_point_identity_covers_case_and_settings() -> None:
    a = ServeSpec.build(scenario="server", target_qps=10)
    b = ServeSpec.build(scenario="server", target_qps=20)
    assert point_key(case(), a) == point_key(case(), a) != point_key(case(), b)
    assert point_key(case("torch"), a) != point_key(case("tensorflow"), a)


def test_figures_come_from_loadgens_detail_log() -> None:
    """A detail log LoadGen wrote (the server scenario, 153.7 qps, p90 <= 100 ms)."""
    found = read_detail_log(DATA / "loadgen-server-detail.txt")
    t = figures_from_log(found, "server", 153.7, 1.5, batch=8)
    assert t.validity == "VALID" and t.invalid_reasons == ()
    assert t.latency_s["90.00"] == pytest.approx(0.046482254)
    assert t.latency_s["50.00"] < t.latency_s["99.00"] <= t.latency_s["99.90"]
    assert t.samples_per_s == pytest.approx(141.21) and t.query_count == 217
    # single stream: a query carries a batch, so samples are queries x batch
    ss = figures_from_log(
        {"result_qps_without_loadgen_overhead": 10.0}, "single_stream", None, 1, 8
    )
    assert ss.samples_per_s == 80.0 and ss.validity == "INVALID"


def test_token_latencies_come_from_a_generations_detail_log() -> None:
    """A generation served at 20 qps (gpt2_tiny, 8 new tokens): LoadGen's time to first
    token, its time per output token, and tokens per second."""
    found = read_detail_log(DATA / "loadgen-generate-server-detail.txt")
    t = figures_from_log(found, "server", 20.0, 23.0, batch=1)
    assert t.validity == "VALID" and t.query_count == 459
    assert t.ttft_s["90.00"] == pytest.approx(0.003665819)
    assert t.tpot_s["90.00"] == pytest.approx(0.000846278)
    assert t.mean_ttft_s == pytest.approx(0.002457553)
    assert t.mean_tpot_s == pytest.approx(0.000787947)
    # 8 tokens a query: tokens per second are 8 x the queries completed
    assert t.tokens_per_s == pytest.approx(157.579)
    assert t.tokens_per_s == pytest.approx(8 * t.samples_per_s, rel=1e-2)
    # a query's latency is its first token plus 7 more
    assert t.latency_s["50.00"] > t.ttft_s["50.00"] + 6 * t.tpot_s["50.00"] * 0.9
    # early stopping's verdict, of each token latency apart
    assert t.early_stopping == "TTFT: * Run successful.; TPOT: * Run successful."
    # a model that does not stream has no token figures
    plain = figures_from_log(read_detail_log(DATA / "loadgen-server-detail.txt"), "server", 1, 1, 8)
    assert plain.ttft_s == {} and plain.tpot_s == {} and plain.tokens_per_s is None


def test_a_single_streams_tokens_per_second_leave_out_loadgens_overhead_as_its_samples_do() -> None:
    """A generation in the single-stream scenario (gpt2_tiny, 8 new tokens, 64 queries):
    samples per second are 1 / the mean latency, without LoadGen's time between
    queries; its completed tokens per second count that time (a CI run, its host busy,
    read 667.8 tokens/s against 8 x 89.4 samples/s). Read as the samples are, they are
    the tokens of a query times the samples per second."""
    found = read_detail_log(DATA / "loadgen-generate-single-stream-detail.txt")
    t = figures_from_log(found, "single_stream", None, 0.3, batch=1)
    assert t.samples_per_s == pytest.approx(161.265)
    assert found["result_completed_tokens_per_second"] == pytest.approx(1278.7)
    assert t.tokens_per_s == pytest.approx(8 * t.samples_per_s, rel=1e-3)
    # A query carries a batch: both rates count its prompts.
    batched = figures_from_log(found, "single_stream", None, 0.3, batch=4)
    assert batched.tokens_per_s == pytest.approx(4 * t.tokens_per_s)
    assert batched.samples_per_s == pytest.approx(4 * t.samples_per_s)
    # Per second already (a LoadGen that writes the unit it names): read as such.
    per_second = {**found, "result_token_throughput": 1290.12}
    assert figures_from_log(per_second, "single_stream", None, 0.3, 1).tokens_per_s == 1290.12
    # None written: the completed rate, as before.
    del per_second["result_token_throughput"]
    assert figures_from_log(per_second, "single_stream", None, 0.3, 1).tokens_per_s == 1278.7


def probe_at(capacity: float):
    """A model that meets the bound below `capacity` qps and misses it above."""

    def probe(qps: float) -> LoadGenTest:
        ok = qps <= capacity
        return LoadGenTest(
            scenario="server", target_qps=qps, validity="VALID" if ok else "INVALID",
            latency_s={"99.00": 0.01 if ok else 1.0}, wall_s=1.0,
        )  # fmt: skip

    return probe


def test_the_rate_search_closes_in_on_the_highest_valid_rate() -> None:
    probes = search(probe_at(70.0), capacity=100.0, steps=7)
    valid = [p.target_qps for p in probes if p.validity == "VALID"]
    assert len(probes) == 7
    assert 70.0 * 0.97 <= max(v for v in valid if v) <= 70.0
    # nothing valid: every probe is kept (the curve), none claimed
    none = search(probe_at(0.0), capacity=100.0, steps=3)
    assert all(p.validity == "INVALID" for p in none)


def test_the_rate_search_looks_above_the_unloaded_capacity() -> None:
    """The unloaded capacity is a start, not a ceiling: a generation served at 6.8/s was
    found at 0.94 qps when the search stopped at 1.1x it (issue 43, defect 5)."""
    probes = search(probe_at(7.0), capacity=1.0, steps=8)
    valid = [p.target_qps or 0.0 for p in probes if p.validity == "VALID"]
    assert 7.0 * 0.9 <= max(valid) <= 7.0
    # half the capacity, just above it, then twice as much until a rate misses; then
    # the search closes in
    assert [p.target_qps for p in probes[:5]] == pytest.approx([0.5, 1.1, 2.2, 4.4, 8.8])


def run(index: int, p90: float, rate: float | None = None, status: str = "ok") -> ServingRun:
    test = LoadGenTest(
        scenario="server", target_qps=rate, validity="VALID",
        latency_s={"50.00": p90 / 2, "90.00": p90}, samples_per_s=rate or 100.0, wall_s=1.0,
    )  # fmt: skip
    if status != "ok":
        return ServingRun(index=index, launcher="spawn", status=status, error="worker crashed")
    # A search that found its bracket: the lowest rate tried above its best missed.
    above = rate * 1.02 if rate else None
    return ServingRun(
        index=index, launcher="fork-server", status="ok", tests=(test,), main=0, max_qps=rate,
        max_qps_above=above, overhead_s=2e-6,
    )  # fmt: skip


def test_a_points_figures_are_over_runs_with_an_interval() -> None:
    point = Point(case(), ServeSpec.build(scenario="server", percentile=0.9))
    runs = [run(0, 0.020, 100.0), run(1, 0.022, 110.0), run(2, 0.021, 90.0)]
    r = build_result(point, runs, [None] * 3, "run", "id", None)
    assert r.status == "ok" and r.served.validity == "VALID"
    p90 = r.served.latency_s["90.00"]
    assert p90.runs == 3 and p90.ci_low < 0.020 < 0.022 < p90.ci_high
    assert (
        r.served.max_qps is not None
        and r.served.max_qps.ci_low < 90
        and r.served.max_qps.ci_high > 110
    )
    assert r.served.overhead_s == 2e-6


def test_failed_runs_are_recorded_and_all_failed_is_the_points_status() -> None:
    point = Point(case(), ServeSpec.build(scenario="single_stream"))
    some = build_result(
        point, [run(0, 0.02), run(1, 0, status="error")], [None] * 2, "r", "i", None
    )
    assert some.status == "ok" and any("1 of 2 runs failed" in w for w in some.warnings)
    assert any("one run" in w for w in some.warnings)
    none = build_result(point, [run(0, 0, status="timeout")], [None], "r", "i", None)
    assert none.status == "timeout" and none.error == "worker crashed"


def test_an_unmeetable_bound_is_an_invalid_point_with_its_reason() -> None:
    point = Point(case(), ServeSpec.build(scenario="server", latency_bound_ms=0.001))
    why = "the bound 0.001 ms is below the unloaded latency of one sample (3 ms)"
    runs = [
        ServingRun(index=i, launcher="spawn", status="ok", invalid_reason=why) for i in range(2)
    ]
    r = build_result(point, runs, [None] * 2, "r", "i", None)
    assert (
        r.status == "ok" and r.served.validity == "INVALID" and r.served.invalid_reasons == (why,)
    )
    assert r.served.latency_s == {} and r.served.max_qps is None


def serving_results() -> list[Result]:
    spec = ServeSpec.build(scenario="server", percentile=0.9)
    out = []
    for fw, p90, rate in (("torch", 0.02, 100.0), ("tensorflow", 0.03, 60.0)):
        runs = [run(i, p90 * (1 + i / 100), rate * (1 - i / 100)) for i in range(3)]
        out.append(build_result(Point(case(fw), spec), runs, [None] * 3, "r", fw, None))
    return out


def test_serving_results_round_trip_through_the_database(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    results = serving_results()
    with ResultStore(db) as store:
        for r in results:
            store.add_serving(r)
    with ResultStore(db, read_only=True) as store:
        back = store.serving()
        flat = store.con.execute(
            "SELECT framework, scenario, p90_s, max_qps FROM serving"
        ).fetchall()
    assert [b.model_dump() for b in back] == [r.model_dump() for r in results]
    assert flat[0][:2] == ("torch", "server") and flat[0][2] == pytest.approx(
        results[0].served.latency_s["90.00"].value
    )


def test_an_older_database_gains_the_serving_table(tmp_path: Path) -> None:
    import gzip

    db = tmp_path / "v7.duckdb"
    with gzip.open(DATA / "results-schema7.duckdb.gz") as src:
        db.write_bytes(src.read())
    with ResultStore(db) as store:
        assert store.serving() == [] and len(store.results()) == 2
        store.add_serving(serving_results()[0])
        assert len(store.serving()) == 1


def test_reports_show_the_verdict_between_frameworks_and_the_curve() -> None:
    results = serving_results()
    text = markdown.render(results)
    assert "## Serving: highest rate under the latency bound" in text
    assert "torch/eager 1.6" in text and "faster" in text
    page = render(results)
    assert "Serving: latency against load" in page and "Verdicts" not in page


def test_points_measured_in_one_group_are_compared_round_by_round(tmp_path: Path) -> None:
    from fwbench.report.serving import _verdict

    spec = ServeSpec.build(scenario="server", percentile=0.9)
    # What slowed the machine in a round slowed both points' runs of that round.
    rounds = (1.0, 1.3, 0.8, 1.15)

    def measured(group_id: str | None) -> list[Result]:
        out = []
        for fw, p90 in (("torch", 0.020), ("tensorflow", 0.0224)):
            runs = [run(i, p90 * f) for i, f in enumerate(rounds)]
            point = Point(case(fw), spec)
            out.append(build_result(point, runs, [None] * 4, "r", fw, None, group_id=group_id))
        return out

    together = measured("g1")
    assert _verdict(together, "90.00", False).startswith("torch/eager 1.12x faster")
    # The same values from separate commands: the rounds' swings stay in the interval.
    assert _verdict(measured(None), "90.00", False).startswith("inconclusive")
    assert "pair the points' runs round by round" in markdown.render(together)
    assert "round by round" not in markdown.render(measured(None))
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        for r in together:
            store.add_serving(r)
    with ResultStore(db, read_only=True) as store:
        assert {r.served.group_id for r in store.serving()} == {"g1"}
        flat = store.con.execute("SELECT DISTINCT group_id FROM serving").fetchall()
    assert flat == [("g1",)]


def test_an_unfinished_point_says_so_and_is_replaced_in_place_as_runs_come_in(
    tmp_path: Path,
) -> None:
    spec = ServeSpec.build(scenario="server", percentile=0.9)
    point = Point(case("torch"), spec)
    runs = [run(i, 0.02 * (1 + i / 100), 100.0) for i in range(3)]
    so_far = build_result(point, runs[:1], [None], "r", "id", None, runs_due=3)
    assert so_far.served.unfinished
    assert "unfinished: the command ended after 1 of this point's 3 runs" in so_far.warnings[0]
    assert "(unfinished after 1 run)" in markdown.render([so_far])
    done = build_result(point, runs, [None] * 3, "r", "id", None)
    assert not done.served.unfinished and not any("unfinished" in w for w in done.warnings)
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add_serving(so_far)
        store.add_serving(done)  # the same result_id: the record so far is replaced
        (back,) = store.serving()
    assert not back.served.unfinished and len(back.served.runs) == 3


def test_a_sweep_serves_its_cases_and_refuses_training(tmp_path: Path) -> None:
    base = "model: resnet18\nframework: torch\ntask: infer\n"
    found = sweep.parse(base + "serve: [{scenario: single_stream}, {scenario: offline}]\n")
    assert [s.scenario for s in found.serve] == ["single_stream", "offline"]
    with pytest.raises(SpecError, match="serving answers queries; set task: infer or generate"):
        sweep.parse("model: resnet18\nframework: torch\nserve: {scenario: offline}\n")
    with pytest.raises(SpecError, match="serve: scenario: invalid value"):
        sweep.parse(base + "serve: {scenario: nightly}\n")
    with pytest.raises(SpecError, match="a scenario mapping"):
        sweep.parse(base + "serve: offline\n")


def test_the_serving_preset_parses_and_is_small() -> None:
    found = sweep.load_preset("serving")
    assert found.serve and all(c.task == "infer" for c in found.cases)
    assert len(found.cases) * len(found.serve) <= 12 and found.timing.plan.min_runs == 3


def test_reasons_are_named_when_only_early_stopping_failed() -> None:
    found = {
        "result_validity": "INVALID", "result_invalid_reason": "",
        "result_perf_constraints_met": True, "result_min_duration_met": True,
        "result_min_queries_met": True, "early_stopping_met": False,
        "early_stopping_result": " * Run unsuccessful.\n * Processed 190 queries.",
    }  # fmt: skip
    t = figures_from_log(found, "server", 10.0, 1.0, 1)
    assert t.invalid_reasons == (
        "early stopping could not accept the percentile",
        "* Run unsuccessful. * Processed 190 queries.",
    )


class Sample:
    def __init__(self, n: int) -> None:
        self.id = n


def test_the_batcher_fills_batches_and_answers_every_sample() -> None:
    import threading

    from fwbench.serve.loadgen import Batches

    ran: list[int] = []
    answered: list[int] = []

    def run(n: int, first: object) -> None:
        ran.append(n)
        if n == 2:
            raise RuntimeError("model failed")

    def complete(samples: list[Sample]) -> None:
        answered.extend(x.id for x in samples)

    # An Offline query of 10 samples arrives at once: full batches of 4, the rest last.
    batches = Batches(lambda n, first: ran.append(n), complete, 4, 0.05)
    batches.issue([Sample(i) for i in range(10)])
    batches.stop()
    batches.serve()
    assert ran == [4, 4, 2] and answered == list(range(10))
    # Single queries and a query of three: one full batch, then the two left over run
    # once their wait is over; the model fails there, and every sample is still answered
    # before the error is raised.
    ran.clear()
    answered.clear()
    batches = Batches(run, complete, 4, 0.05)
    for i in range(3):
        batches.issue([Sample(i)])
    batches.issue([Sample(7), Sample(8), Sample(9)])
    threading.Timer(0.3, batches.stop).start()
    with pytest.raises(RuntimeError, match="model failed"):
        batches.serve()
    assert ran == [4, 2] and answered == [0, 1, 2, 7, 8, 9]


def test_a_streaming_batch_is_answered_its_first_token_then_whole() -> None:
    """A generation's batch: its samples' first tokens are answered when the model has
    them (LoadGen's time to first token), the samples whole when it returns; a model
    that fails before its first token still has every sample answered."""
    from fwbench.serve.loadgen import Batches

    events: list[tuple[str, list[int]]] = []

    def run(n: int, first) -> None:
        events.append(("prefill", [n]))
        if n == 3:
            raise RuntimeError("prefill failed")
        first()
        events.append(("decoded", [n]))

    def answer(kind: str):
        return lambda samples: events.append((kind, [x.id for x in samples]))

    batches = Batches(run, answer("complete"), 2, 0.0, first=answer("first token"))
    batches.issue([Sample(0), Sample(1)])
    batches.stop()
    batches.serve()
    assert events == [
        ("prefill", [2]), ("first token", [0, 1]), ("decoded", [2]), ("complete", [0, 1])
    ]  # fmt: skip
    events.clear()
    batches = Batches(run, answer("complete"), 3, 0.0, first=answer("first token"))
    batches.issue([Sample(5), Sample(6), Sample(7)])
    batches.stop()
    with pytest.raises(RuntimeError, match="prefill failed"):
        batches.serve()
    assert events == [("prefill", [3]), ("complete", [5, 6, 7])]


def test_bounds_are_of_the_kind_the_task_answers_with() -> None:
    from fwbench.scenario.spec import check_point

    gen = Case.build(framework="torch", model="gpt2_tiny", task="generate", batch_size=1, seq_len=8)
    tokens = ServeSpec.build(scenario="server", ttft_bound_ms=500, tpot_bound_ms=50)
    assert (tokens.ttft_bound_s, tokens.tpot_bound_s) == (0.5, 0.05)
    check_point(gen, tokens)
    check_point(gen, ServeSpec.build(scenario="server"))  # the defaults: 2 s and 200 ms
    assert ServeSpec.build(scenario="server").ttft_bound_s == 2.0
    with pytest.raises(SpecError, match="latency_bound_ms does not apply to task generate; "
                       "its bounds are ttft_bound_ms and tpot_bound_ms"):  # fmt: skip
        check_point(gen, ServeSpec.build(scenario="server", latency_bound_ms=50))
    with pytest.raises(SpecError, match="ttft_bound_ms does not apply to task infer"):
        check_point(case(), ServeSpec.build(scenario="server", ttft_bound_ms=50))
    with pytest.raises(SpecError, match="give one kind"):
        ServeSpec.build(scenario="server", latency_bound_ms=5, tpot_bound_ms=5)
    with pytest.raises(SpecError, match="tpot_bound_ms: applies to the server scenario"):
        ServeSpec.build(scenario="single_stream", tpot_bound_ms=5)
    # an explicit default names the same point as an omitted one
    explicit = ServeSpec.build(scenario="server", ttft_bound_ms=2000, tpot_bound_ms=200)
    assert point_key(gen, explicit) == point_key(gen, ServeSpec.build(scenario="server"))


def test_explicit_defaults_name_the_same_point() -> None:
    plain = ServeSpec.build(scenario="server")
    explicit = ServeSpec.build(scenario="server", latency_bound_ms=100, percentile=0.99)
    assert point_key(case(), plain) == point_key(case(), explicit)
    with pytest.raises(SpecError, match=r"percentile: LoadGen reports 0\.5, 0\.9"):
        ServeSpec.build(scenario="server", percentile=0.98)


def test_rates_within_the_search_resolution_are_not_called_different() -> None:
    spec = ServeSpec.build(scenario="server", percentile=0.9)
    out = []
    for fw, rate in (("torch", 100.0), ("tensorflow", 95.0)):
        runs = [
            run(i, 0.02, rate).model_copy(update={"max_qps_above": rate * 1.10}) for i in range(3)
        ]
        out.append(build_result(Point(case(fw), spec), runs, [None] * 3, "r", fw, None))
    assert out[0].served.search_resolution == pytest.approx(0.10)
    text = markdown.render(out)
    assert "equivalent within ±10%" in text


def test_a_run_beside_other_load_is_flagged_busy() -> None:
    point = Point(case(), ServeSpec.build(scenario="single_stream"))
    quiet = [run(i, 0.02).model_copy(update={"other_cpu_cores": 0.02}) for i in range(3)]
    assert not any(
        "busy" in w for w in build_result(point, quiet, [None] * 3, "r", "i", None).warnings
    )
    busy = [*quiet[:2], quiet[2].model_copy(update={"other_cpu_cores": 1.05})]
    r = build_result(point, busy, [None] * 3, "r", "i", None)
    assert any(
        w.startswith("busy machine: other processes used 1.05 cores during run 3 (1 of 3")
        for w in r.warnings
    )
    # Runs stored before the load was measured (None) are not flagged.
    assert not any(
        "busy" in w for w in build_result(point, [run(0, 0.02)], [None], "r", "i", None).warnings
    )


def test_a_serving_row_of_schema_10_reads_its_run_id_as_its_invocation_id(
    tmp_path: Path,
) -> None:
    """Before schema 11 the serving table's column and its record's key were run_id."""
    import gzip
    import json

    import duckdb

    db = tmp_path / "v10.duckdb"
    with gzip.open(DATA / "results-schema10.duckdb.gz") as src:
        db.write_bytes(src.read())
    r = serving_results()[0]
    record = {
        ("run_id" if k == "invocation_id" else k): v
        for k, v in {
            **json.loads(r.model_dump_json()),
            "schema_version": 10,
            "invocation_id": "old",
        }.items()
    }
    con = duckdb.connect(str(db))
    con.execute(
        "INSERT INTO serving (result_id, run_id, recorded_at, record) VALUES (?, 'old', ?, ?)",
        [r.result_id, r.recorded_at, json.dumps(record)],
    )
    con.close()
    with ResultStore(db) as store:
        (back,) = store.serving(invocation_id="old")
    assert back.invocation_id == "old" and back.schema_version == 10
    now = {"invocation_id": r.invocation_id, "schema_version": r.schema_version}
    assert back.model_copy(update=now) == r


def test_a_generations_points_have_token_tables_each_read_at_its_own_percentile() -> None:
    """Served generations: TTFT and TPOT over runs, their own tables (not the query
    latency's), and a fixed-rate verdict read at each group's own bound percentile."""
    from fwbench.report.serving import tables
    from fwbench.scenario.spec import streams

    def gen(framework: str) -> Case:
        return Case.build(
            framework=framework, model="gpt2_tiny", task="generate", batch_size=1, seq_len=8,
            threads=1,
        )  # fmt: skip

    def token_run(i: int, ttft: dict[str, float], tpot: float) -> ServingRun:
        test = LoadGenTest(
            scenario="server", target_qps=5.0, validity="VALID", wall_s=1.0,
            latency_s={"50.00": 0.1}, ttft_s=ttft, tpot_s={"50.00": tpot, "90.00": tpot,
            "99.00": tpot}, tokens_per_s=40.0, samples_per_s=5.0,
        )  # fmt: skip
        return ServingRun(index=i, launcher="fork-server", status="ok", tests=(test,), main=0)

    results = []
    for percentile, key in ((0.9, "90.00"), (0.99, "99.00")):
        spec = ServeSpec.build(scenario="server", target_qps=5, percentile=percentile)
        for fw, slow in (("torch", 1.0), ("tensorflow", 2.0)):
            # TTFT differs 2x at this group's percentile only; the other is equal.
            ttft = {"50.00": 0.01, "90.00": 0.02, "99.00": 0.02}
            ttft[key] *= slow
            runs = [token_run(i, {k: v * (1 + i / 100) for k, v in ttft.items()}, 0.005)
                    for i in range(3)]  # fmt: skip
            results.append(build_result(Point(gen(fw), spec), runs, [None] * 3, "r", fw, None))
    r = results[0]
    assert (
        streams(r.case) and r.served.ttft("90.00") is not None and r.served.ttft("90.00").runs == 3
    )
    assert r.served.tokens_per_s is not None and r.served.tokens_per_s.value == pytest.approx(40.0)
    (fixed,) = [t for t in tables(results) if "fixed rate" in t.heading]
    assert fixed.heading == "Serving generation: token latency at a fixed rate"
    verdicts = [row[-2] for row in fixed.rows if row[-2]]
    assert len(verdicts) == 2
    assert all(v.startswith("torch/eager 2") for v in verdicts), verdicts
    assert not any(t.heading.startswith("Serving: latency") for t in tables(results))


@pytest.mark.parametrize(
    "setting",
    [
        {"latency_bound_ms": 1e100},
        {"ttft_bound_ms": 1e100},
        {"tpot_bound_ms": 1e30},
        {"max_wait_ms": 1e100},
        {"target_qps": 1e300},
    ],
)
def test_a_bound_loadgen_cannot_hold_is_refused_before_any_work(setting: dict[str, float]) -> None:
    """Values that passed validation failed inside LoadGen ("incompatible function
    arguments", recorded as the case's error): refused up front (issue 43, defect 3)."""
    from pydantic import ValidationError

    from fwbench.scenario.spec import ServeSpec

    with pytest.raises(ValidationError, match="less than or equal to"):
        ServeSpec(scenario="server", **setting)


def _points(
    p90s: dict[str, list[float]], rates: dict[str, list[float]], tag: str, batch: int = 4
) -> list[Result]:
    """A SingleStream point per framework with these per-run p90s, and a rate search per
    framework with these per-run highest rates."""
    single = ServeSpec.build(scenario="single_stream")
    searched = ServeSpec.build(scenario="server", percentile=0.9)
    out = []
    for spec, by_framework, p90 in ((single, p90s, None), (searched, rates, 0.02)):
        for fw, values in by_framework.items():
            runs = [run(i, p90 or v, None if p90 is None else v) for i, v in enumerate(values)]
            point = Point(case(fw, batch), spec)
            rid = f"{fw}-{spec.scenario}-{batch}-{tag}"
            out.append(build_result(point, runs, [None] * len(runs), tag, rid, None))
    return out


def test_compare_matches_serving_points_and_reads_the_figures_their_verdicts_read(
    tmp_path: Path,
) -> None:
    """A point is matched by its point key and compared on its report's verdict figures:
    a SingleStream point's p90 latency, a rate search's highest rate (higher is better:
    a lower rate is the regression), over each side's runs."""
    import json
    import subprocess
    import sys

    import numpy as np

    from fwbench.report.regression import changes

    rng = np.random.default_rng(3)

    def noisy(centre: float) -> list[float]:
        return [centre * float(np.exp(rng.normal(0, 0.02))) for _ in range(5)]

    base = _points({"torch": noisy(0.020), "tensorflow": noisy(0.030)}, {"torch": noisy(100)}, "a")
    new = _points({"torch": noisy(0.020), "tensorflow": noisy(0.039)}, {"torch": noisy(70)}, "b")
    found = changes(base, new, threshold=0.05)
    kinds = {(c.kind, c.figure, c.new.case.framework) for c in found if c.new}
    assert kinds == {
        ("regression", "p90 latency", "tensorflow"),  # 30% slower
        ("regression", "highest rate under the bound", "torch"),  # 30% fewer queries/s
        ("unchanged", "p90 latency", "torch"),
    }
    rate = next(c for c in found if c.figure.startswith("highest rate"))
    assert rate.describe().startswith("regression: highest rate under the bound -2")
    assert rate.shown is not None and rate.shown[0].endswith("queries/s")
    # The same through the CLI, from two databases: the gate fails on the regressions.
    dbs = []
    for name, points in (("base", base), ("new", new)):
        db = tmp_path / f"{name}.duckdb"
        with ResultStore(db) as store:
            for p in points:
                store.add_serving(p)
        dbs.append(str(db))
    proc = subprocess.run(
        [sys.executable, "-m", "fwbench", "compare", *dbs, "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    rows = json.loads(proc.stdout)
    assert sorted(r["kind"] for r in rows) == ["regression", "regression", "unchanged"]
    assert {r["figure"] for r in rows} == {"p90 latency", "highest rate under the bound"}


def test_compare_of_unchanged_serving_points_raises_no_false_alarm() -> None:
    """A/A: 12 figures of 12 points measured twice, 3 runs each, runs differing by 3%
    from process to process: the family-wise gate calls at most 5% of whole comparisons
    a regression."""
    import numpy as np

    from fwbench.report.regression import changes

    alarms = 0
    for seed in range(100):
        rng = np.random.default_rng(seed)

        def noisy(centre: float, rng: np.random.Generator = rng) -> list[float]:
            return [centre * float(np.exp(rng.normal(0, 0.03))) for _ in range(3)]

        sets: list[list[Result]] = [[], []]
        for batch in (1, 2, 4):
            for side, tag in enumerate(("a", "b")):
                latency = {"torch": noisy(0.02), "tensorflow": noisy(0.03)}
                rates = {"torch": noisy(100.0), "tensorflow": noisy(80.0)}
                sets[side] += _points(latency, rates, tag, batch)
        found = changes(*sets, threshold=0.05)
        assert len(found) == 12
        alarms += any(c.kind == "regression" for c in found)
    assert alarms / 100 <= 0.05


@pytest.mark.parametrize("decoding", ["stream", "loop"])
def test_loadgens_answer_to_the_first_token_is_in_no_decoding_steps_time(decoding: str) -> None:
    """Served, a generation answers LoadGen when its first token is made (first_output):
    that call is neither the prefill's time nor a decoding step's, whether the steps are
    timed one by one or as one compiled loop (fake clock: prefill 3 s, each step 1 s,
    LoadGen's answer 100 s)."""
    import numpy as np

    from fwbench.frameworks.generation import GenerateWorkload

    now = [0.0]

    class Made(GenerateWorkload):
        LOOPS = True

        def prefill(self) -> np.ndarray:
            now[0] += 3.0
            return np.zeros(1, np.int64)

        def decode(self, tokens: np.ndarray, position: int) -> np.ndarray:
            now[0] += 1.0
            return tokens

        def decode_rest(self, tokens: np.ndarray, count: int) -> np.ndarray:
            now[0] += 1.0 * count
            return np.zeros((1, count), np.int64)

    case = Case.build(
        framework="keras-jax", mode="jit", model="gpt2_tiny", task="generate", batch_size=1,
        seq_len=8, task_dims="new_tokens=5", options=f"decoding={decoding}",
    )  # fmt: skip
    workload = Made(case, clock=lambda: now[0])

    def answer() -> None:
        now[0] += 100.0

    workload.first_output = answer
    workload.step()
    found = workload.figures()
    assert (found["ttft_s"], found["tpot_s"]) == (3.0, 1.0), found


def test_a_serving_run_that_cannot_start_its_worker_is_that_runs_failure(tmp_path: Path) -> None:
    """A worker that cannot be started (no process left, a fork server gone bad) fails
    that run, recorded as a case's run would be; it used to end the whole command."""
    from fwbench.launch.protocol import ServeRequest
    from fwbench.launch.serving import _one_run
    from fwbench.measure.timing import RunTiming

    class Exhausted:
        def for_case(self, *args: object) -> None:
            raise OSError(24, "Too many open files")

    case = Case.build(framework="torch", model="resnet18", task="infer", batch_size=1)
    request = ServeRequest(
        case=case, spec=ServeSpec(scenario="offline"), timing=RunTiming(), log_dir=str(tmp_path)
    )
    run, report = _one_run(request, 0, 3, 10.0, Exhausted())  # type: ignore[arg-type]
    assert report is None
    assert (run.status, run.index) == ("error", 0)
    assert run.error == "cannot start a worker: OSError: [Errno 24] Too many open files"


def test_a_serving_record_that_contradicts_itself_is_refused() -> None:
    from pydantic import ValidationError

    from fwbench.scenario.record import Figure, ServingRun

    with pytest.raises(ValidationError, match="interval must contain its value"):
        Figure(value=1.0, ci_low=5.0, ci_high=0.5, runs=2)
    with pytest.raises(ValidationError, match="main: test 3 of 0"):
        ServingRun(index=0, launcher="spawn", status="ok", main=3)


def test_a_points_identity_leaves_out_where_its_model_lies() -> None:
    """The same model file elsewhere is the same point, as it is the same case: a moved
    file's points were run again by --resume and compared with nothing. A record stored
    under the key with the path still reads, found under today's key."""
    from fwbench.scenario.spec import point_key_before_2026_12

    spec = ServeSpec.build(scenario="offline")
    here, there = (case().model_copy(update={"model_path": p}) for p in ("/a/n.onnx", "/b/n.onnx"))
    assert point_key(here, spec) == point_key(there, spec) == point_key(case(), spec)
    (old,) = serving_results()[:1]
    stored = old.model_copy(
        update={
            "case": here,
            "serving": old.served.model_copy(
                update={"point_key": point_key_before_2026_12(here, old.served.spec)}
            ),
        }
    )
    assert stored.served.point_key != point_key(here, old.served.spec)
    assert stored.point_key == point_key(case(), old.served.spec)
    stored._check_derived(stored.to_record())  # an export of then still imports


def test_a_search_that_found_only_a_floor_or_lost_runs_decides_no_verdict() -> None:
    """Every rate a 4-step search tried met the bound in each run: its best is a floor,
    set by the unloaded capacity it started from. torch truly serving 1000 qps from a
    capacity of 20/s, TensorFlow 500 from 100/s, read as "TensorFlow 5x faster". A run
    that found no valid rate was dropped from its side's mean, which read the others'."""
    from fwbench.report.regression import changes
    from fwbench.report.serving import _verdict
    from fwbench.serve.loadgen import run_scenario

    spec = ServeSpec.build(scenario="server", percentile=0.9, search_steps=4)

    class Bound:
        def __init__(self, most: float) -> None:
            self.most = most

        def server(self, served: object, spec: ServeSpec, qps: float) -> LoadGenTest:
            ok = qps <= self.most
            return LoadGenTest(
                scenario="server", target_qps=qps, validity="VALID" if ok else "INVALID",
                latency_s={"90.00": 0.05 if ok else 0.5}, samples_per_s=qps, wall_s=1.0,
            )  # fmt: skip

    class Served:
        tokens = None
        sizes = (1, 8)

        def __init__(self, capacity: float) -> None:
            self.capacity, self.latency_s, self.unloaded = capacity, {1: 0.001}, {}

    points = []
    for fw, most, capacity in (("torch", 1000.0, 20.0), ("tensorflow", 500.0, 100.0)):
        runs = [
            ServingRun(index=i, launcher="fork-server", status="ok",
                       **run_scenario(Bound(most), Served(capacity * k), spec))  # type: ignore[arg-type]
            for i, k in enumerate((1.0, 1.01, 0.99))
        ]  # fmt: skip
        points.append(build_result(Point(case(fw), spec), runs, [None] * 3, "r", fw, None, "g"))
    said = _verdict(points, "max_qps", True)
    assert said.startswith(
        "inconclusive: torch/eager: in 3 of 3 runs every rate tried met the bound"
    )
    assert "faster" not in said
    assert "(a floor: see its verdict)" in markdown.render(points)
    (change,) = changes(points[:1], points[:1])
    assert change.kind == "undecided" and "every rate tried met the bound" in change.describe()
    # Two of torch's three runs found no rate that met the bound.
    lost = build_result(
        Point(case("torch"), spec),
        [run(0, 0.02, 200.0), *(ServingRun(index=i, launcher="fork-server", status="ok",
         invalid_reason="no rate tried met p90 <= 100 ms") for i in (1, 2))],
        [None] * 3, "r", "torch", None, "g",
    )  # fmt: skip
    steady = build_result(
        Point(case("tensorflow"), spec), [run(i, 0.02, 100.0 * (1 + i / 50)) for i in range(3)],
        [None] * 3, "r", "tensorflow", None, "g",
    )  # fmt: skip
    assert _verdict([lost, steady], "max_qps", True) == (
        "inconclusive: torch/eager: 2 of 3 runs found no valid figure"
    )


def test_a_fixed_rate_table_shows_the_percentile_its_verdict_reads() -> None:
    """At a p95 bound torch is lower at p50, p90 and p99 but higher at p95, which the
    verdict reads: the table showed only the three, beside "TensorFlow 1.33x faster"."""
    spec = ServeSpec.build(scenario="server", target_qps=50, percentile=0.95)
    lat = {
        "torch": {"50.00": 0.010, "90.00": 0.020, "95.00": 0.040, "99.00": 0.050},
        "tensorflow": {"50.00": 0.012, "90.00": 0.024, "95.00": 0.030, "99.00": 0.060},
    }
    points = []
    for fw in ("torch", "tensorflow"):
        runs = [
            ServingRun(index=i, launcher="fork-server", status="ok", main=0, tests=(LoadGenTest(
                scenario="server", target_qps=50, validity="VALID", samples_per_s=49.0, wall_s=1,
                latency_s={k: v * j for k, v in lat[fw].items()}),))
            for i, j in enumerate((1.0, 1.02, 0.98))
        ]  # fmt: skip
        points.append(build_result(Point(case(fw), spec), runs, [None] * 3, "r", fw, None, "g"))
    text = markdown.render(points)
    assert "| bound's percentile, ms |" in text
    assert "| p95: 40 (" in text and "| p95: 30 (" in text
    assert "tensorflow/graph 1.33x faster" in text


def test_a_searched_rate_is_what_was_completed_and_each_run_draws_its_own_arrivals(
    tmp_path: Path,
) -> None:
    """A 1.5 s Poisson schedule offers a rate off its target (LoadGen's log: 143.9
    scheduled, 141.2 completed of 153.7 asked), and with LoadGen's one default seed the
    same offset in every run, which the interval over runs could not show."""
    from fwbench.serve.loadgen import LoadGen, run_scenario

    class Short:
        def server(self, served: object, spec: ServeSpec, qps: float) -> LoadGenTest:
            ok = qps <= 150
            return LoadGenTest(
                scenario="server", target_qps=qps, validity="VALID" if ok else "INVALID",
                latency_s={"90.00": 0.05}, samples_per_s=qps * 0.92, wall_s=1.0,
            )  # fmt: skip

    class Served:
        tokens, sizes, latency_s, unloaded, capacity = None, (1, 8), {1: 0.001}, {}, 100.0

    spec = ServeSpec.build(scenario="server", percentile=0.9, search_steps=6)
    found = run_scenario(Short(), Served(), spec)  # type: ignore[arg-type]
    best = found["tests"][found["main"]]
    assert found["max_qps"] == pytest.approx(best.target_qps * 0.92)
    # The bracket keeps its ratio to the best: the search's resolution.
    above = min(t.target_qps for t in found["tests"] if t.target_qps > best.target_qps)
    assert found["max_qps_above"] / found["max_qps"] == pytest.approx(above / best.target_qps)
    settings = [LoadGen(tmp_path, seed).settings("server", 1.0, 44, 50.0) for seed in (0, 3)]
    assert [s.schedule_rng_seed for s in settings] == [0, 3]
    assert [s.sample_index_rng_seed for s in settings] == [0, 3]


def test_a_percentile_from_too_few_queries_says_so() -> None:
    """SingleStream stops at 64 queries: its p99 is the slowest query, not a percentile
    (LoadGen's early stopping would need 459 to accept one), shown as a p99 with an
    interval and nothing else."""
    spec = ServeSpec.build(scenario="single_stream")
    runs = [
        ServingRun(index=i, launcher="fork-server", status="ok", main=0, tests=(LoadGenTest(
            scenario="single_stream", validity="VALID", samples_per_s=160.0, wall_s=1,
            query_count=64, latency_s={"50.00": 0.006, "90.00": 0.0064, "99.00": 0.0072}),))
        for i in range(3)
    ]  # fmt: skip
    point = build_result(Point(case(), spec), runs, [None] * 3, "r", "torch", None)
    (row,) = (line for line in markdown.render([point]).splitlines() if "| torch/eager |" in line)
    assert "7.2 (7.2-7.2) (64 queries: p99 needs 459)" in row
    assert "6.4 (6.4-6.4) |" in row  # p90 needs 44
