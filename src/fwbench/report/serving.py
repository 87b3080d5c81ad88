"""The serving section of a report: tables and the latency-throughput curve, built once
from serving points' Results (their `serving` part) and rendered by the HTML and
Markdown reports alike."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fwbench.case import execution_note
from fwbench.measure.verdicts import DEFAULT_BAND, Comparison
from fwbench.report import warnings
from fwbench.result import Result
from fwbench.scenario.record import Figure, ServingRun
from fwbench.scenario.spec import min_queries, point_label, streams


@dataclass(frozen=True)
class Table:
    heading: str
    note: str
    head: list[str]
    rows: list[list[str]]


def _ms(f: Figure | None) -> str:
    if f is None:
        return "-"
    if f.runs < 2:
        return f"{f.value * 1e3:.3g} (1 run)"
    return f"{f.value * 1e3:.3g} ({f.ci_low * 1e3:.3g}-{f.ci_high * 1e3:.3g})"


def _pct(r: Result, figure: str, key: str) -> str:
    """A latency percentile's cell ("latency", "ttft" or "tpot" at "99.00"), marked where
    a run had too few queries for it: at 64 queries a p99 is the slowest query, not a
    percentile (min_queries: what LoadGen's early stopping needs of it)."""
    found: Figure | None = getattr(r.served, figure)(key)
    text = _ms(found)
    counts = [
        t.query_count
        for run in r.served.runs
        if run.status == "ok" and (t := run.main_test) is not None and t.query_count
    ]
    need = min_queries(float(key) / 100)
    if found is not None and counts and min(counts) < need:
        text += f" ({min(counts)} queries: p{float(key):g} needs {need})"
    return text


def _rate(f: Figure | None) -> str:
    if f is None:
        return "-"
    if f.runs < 2:
        return f"{f.value:.4g} (1 run)"
    return f"{f.value:.4g} ({f.ci_low:.4g}-{f.ci_high:.4g})"


def _validity(r: Result) -> str:
    if r.status != "ok":
        return f"{r.status}: {r.error}"
    # A killed command's point: its figures (and verdict) read the runs it made.
    n = len(r.served.runs)
    cut = f" (unfinished after {n} run{'' if n == 1 else 's'})" if r.served.unfinished else ""
    if r.served.validity == "VALID":
        return "VALID" + cut
    return "INVALID: " + "; ".join(r.served.invalid_reasons or ("see LoadGen's log",)) + cut


def _groups(results: Sequence[Result], streaming: bool | None = None) -> list[list[Result]]:
    """The newest result of each point, grouped by workload and scenario; `streaming`:
    only the points whose task streams tokens (True) or does not (False)."""
    newest = {r.point_key: r for r in sorted(results, key=lambda r: r.recorded_at)}
    found: dict[tuple[object, ...], list[Result]] = {}
    for r in newest.values():
        if streaming is None or streams(r.case) == streaming:
            found.setdefault((r.case.workload_key(), r.served.spec), []).append(r)
    return list(found.values())


def _verdict(
    group: Sequence[Result],
    values: str,
    higher_is_better: bool,
    band: float | None = None,
) -> str:
    """The best variant against the runner-up, on per-run values (compare's three
    outcomes; lower is better there, so rates are inverted). A rate search does not tell
    apart rates closer than its resolution: the equivalence band is at least that.
    Points measured in one group are read paired by round, as step times are."""
    reasons = [why for r in group if (why := undecided(r, values)) is not None]
    if reasons:
        return "inconclusive: " + "; ".join(reasons)
    runs, rounds = {}, {}
    for r in group:
        found = lower_is_better(r, values, higher_is_better)
        runs[r.case.variant] = [v for _, v in found]
        rounds[r.case.variant] = [index for index, _ in found]
    band = DEFAULT_BAND if band is None else band
    if values == "max_qps":
        band = max([band, *(r.served.search_resolution or 0.0 for r in group)])
    groups = {r.case.variant: r.served.group_id for r in group}
    verdict = Comparison.of(runs, band=band, rounds=rounds, groups=groups).verdict()
    if verdict is None:
        return ""
    cases = {r.case.variant: r.case for r in group}
    return verdict.text() + execution_note(cases[verdict.faster], cases[verdict.slower])


def verdict_figures(r: Result) -> list[tuple[str, bool, str]]:
    """The figures a serving point's verdicts read, as its report table reads them:
    (the `per_run` name, whether higher is better, what the figure is called)."""
    spec, streaming = r.served.spec, streams(r.case)
    if spec.searches:
        return [("max_qps", True, "highest rate under the bound")]
    if spec.scenario == "offline":
        rate = "tokens_per_s" if streaming else "samples_per_s"
        return [(rate, True, "tokens per second" if streaming else "samples per second")]
    key = "90.00" if spec.scenario == "single_stream" else _key(r)
    at = f"p{float(key):g}"
    if streaming:
        return [
            (f"ttft:{key}", False, f"{at} time to first token"),
            (f"tpot:{key}", False, f"{at} time per output token"),
        ]
    return [(key, False, f"{at} latency")]


def per_run(r: Result, values: str) -> list[tuple[int, float]]:
    """Each run's value of `values` with the run's round (ServingRun.index), for the runs
    that have one: max_qps, samples_per_s, tokens_per_s, a latency percentile ("90.00"),
    or a token latency's ("ttft:90.00", "tpot:90.00")."""
    if r.status != "ok":
        return []
    out = []
    for run in r.served.runs:
        main = run.main_test
        kind, _, percentile = values.rpartition(":")
        if values == "max_qps":
            value = run.max_qps
        elif main is None:
            value = None
        elif values in ("samples_per_s", "tokens_per_s"):
            value = getattr(main, values)
        else:
            value = getattr(main, f"{kind or 'latency'}_s").get(percentile)
        if value:
            out.append((run.index, value))
    return out


def undecided(r: Result, values: str) -> str | None:
    """Why a point's runs cannot decide a verdict on `values`, or None. A run that found
    no valid figure is not missing at random: its rate lay below the lowest tried, and
    the others' mean left without it is biased up. A search whose every rate met the
    bound found only a floor of its highest rate (the doubling from the unloaded
    capacity stopped first): its value is less than the truth, by any factor."""
    ok = [run for run in r.served.runs if run.status == "ok"]
    found = per_run(r, values)
    variant = r.case.variant
    if len(found) < len(ok):
        return f"{variant}: {len(ok) - len(found)} of {len(ok)} runs found no valid figure"
    if values == "max_qps":
        floors = _floors(r)
        if floors:
            return (
                f"{variant}: in {len(floors)} of {len(ok)} runs every rate tried met the bound, "
                f"so its highest rate lies above {min(run.max_qps or 0 for run in floors):.4g} "
                "qps, not found (more search steps find it)"
            )
    return None


def _floors(r: Result) -> list[ServingRun]:
    """The runs whose rate search met the bound at every rate it tried (no bracket)."""
    return [
        run for run in r.served.runs if run.status == "ok" and run.max_qps and not run.max_qps_above
    ]


def _max_rate(r: Result) -> str:
    """A searched point's highest rate; marked where a run's search found only a floor."""
    return _rate(r.served.max_qps) + (" (a floor: see its verdict)" if _floors(r) else "")


def lower_is_better(r: Result, values: str, higher_is_better: bool) -> list[tuple[int, float]]:
    """`per_run`'s values as comparisons read them, lower being better: a rate (higher
    is better) becomes its inverse, the time per item."""
    return [(index, 1 / v if higher_is_better else v) for index, v in per_run(r, values)]


def tables(results: Sequence[Result], band: float | None = None) -> list[Table]:
    """One table per scenario that was measured, with a verdict per workload; a
    generation's (a streaming task's) in tables of its token latencies."""
    out = [*_query_tables(results, band), *_token_tables(results, band)]
    notes = []
    if any(
        n > 1
        for g in _groups(results)
        for n in Counter(r.served.group_id for r in g if r.served.group_id).values()
    ):
        notes.append(
            "Verdicts pair the points' runs round by round where the points ran in the same "
            "rounds (one command): what slowed the machine in a round slowed both."
        )
    overheads = [r.served.overhead_s for r in results if r.served.overhead_s is not None]
    if overheads:
        notes.append(
            "The harness's own latency (a no-op model served the same way): "
            f"{max(overheads) * 1e6:.3g} µs at most."
        )
    if out and notes:
        out[0] = Table(out[0].heading, " ".join([out[0].note, *notes]), out[0].head, out[0].rows)
    grouped = warnings.group(
        (point_label(r.case, r.served.spec), w)
        for g in _groups(results)
        for r in g
        for w in r.warnings
    )
    if grouped:
        rows = [[g.text(), g.where()] for g in grouped]
        out.append(Table("Serving: warnings", "", ["warning", "where"], rows))
    return out


def _rows(
    groups: list[list[Result]], cells: Callable[[Result], list[str]], band: float | None
) -> list[list[str]]:
    """A table's rows: each point's cells and LoadGen's validity, and on its group's
    first row a verdict per figure its verdicts read (`verdict_figures`, which compare
    reads too)."""
    return [
        [
            *cells(r),
            _validity(r),
            *(
                _verdict(g, values, higher, band) if i == 0 else ""
                for values, higher, _ in verdict_figures(g[0])
            ),
        ]
        for g in groups
        for i, r in enumerate(g)
    ]


def _query_tables(results: Sequence[Result], band: float | None) -> list[Table]:
    """Tables of the points whose queries are answered whole (their latency)."""
    out = []
    single = [g for g in _groups(results, False) if g[0].served.spec.scenario == "single_stream"]
    if single:
        rows = _rows(
            single,
            lambda r: [
                r.case.model,
                str(r.case.batch_size),
                r.case.variant,
                _pct(r, "latency", "50.00"),
                _pct(r, "latency", "90.00"),
                _pct(r, "latency", "99.00"),
                _rate(r.served.samples_per_s),
            ],
            band,
        )
        out.append(
            Table(
                "Serving: SingleStream latency",
                "One query at a time, each a batch of `batch` inputs; latency in ms with its "
                "95% interval over runs; the verdict compares p90 (MLPerf's SingleStream "
                "metric), per run.",
                [
                    "model",
                    "batch",
                    "variant",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "samples/s",
                    "LoadGen",
                    "verdict (p90)",
                ],
                rows,
            )
        )
    searched = [g for g in _groups(results, False) if g[0].served.spec.searches]
    if searched:
        rows = _rows(
            searched,
            lambda r: [
                r.case.model,
                str(r.case.batch_size),
                r.served.spec.label(),
                r.case.variant,
                _max_rate(r),
                _pct(r, "latency", _key(r)),
            ],
            band,
        )
        out.append(
            Table(
                "Serving: highest rate under the latency bound",
                "MLPerf's Server result: the highest Poisson arrival rate (queries of one "
                "input each, dynamic batching up to `max batch`) whose latency percentile "
                "stays under the bound, found by bisection in each run; 95% interval over runs.",
                [
                    "model",
                    "max batch",
                    "scenario",
                    "variant",
                    "max qps",
                    "latency at the bound's percentile, ms",
                    "LoadGen",
                    "verdict (max qps)",
                ],
                rows,
            )
        )
    fixed = [
        g
        for g in _groups(results, False)
        if g[0].served.spec.scenario == "server" and not g[0].served.spec.searches
    ]
    if fixed:
        rows = _rows(
            fixed,
            lambda r: [
                r.case.model,
                str(r.case.batch_size),
                r.served.spec.label(),
                r.case.variant,
                _rate(r.served.samples_per_s),
                _pct(r, "latency", "50.00"),
                _pct(r, "latency", "90.00"),
                _pct(r, "latency", "99.00"),
                # The one its verdict reads (p95 bound: a p95 that none of the others is).
                f"p{r.served.spec.bound_percentile * 100:g}: {_pct(r, 'latency', _key(r))}",
            ],
            band,
        )
        out.append(
            Table(
                "Serving: latency at a fixed rate",
                "Poisson arrivals at the target rate; achieved samples/s and latency in ms, "
                "95% interval over runs.",
                [
                    "model",
                    "max batch",
                    "scenario",
                    "variant",
                    "samples/s",
                    "p50 ms",
                    "p90 ms",
                    "p99 ms",
                    "bound's percentile, ms",
                    "LoadGen",
                    "verdict (the bound's percentile)",
                ],
                rows,
            )
        )
    offline = [g for g in _groups(results, False) if g[0].served.spec.scenario == "offline"]
    if offline:
        rows = _rows(
            offline,
            lambda r: [
                r.case.model,
                str(r.case.batch_size),
                r.case.variant,
                _rate(r.served.samples_per_s),
            ],
            band,
        )
        out.append(
            Table(
                "Serving: Offline throughput",
                "All queries at once, run in batches of `batch`; samples per second, 95% "
                "interval over runs.",
                ["model", "batch", "variant", "samples/s", "LoadGen", "verdict"],
                rows,
            )
        )
    return out


def _token_tables(results: Sequence[Result], band: float | None) -> list[Table]:
    """Tables of generations served as streams: LoadGen's time to first token (TTFT),
    time per output token after it (TPOT) and tokens per second, per scenario."""
    out = []
    groups = _groups(results, True)

    def rows(kind: list[list[Result]], cells: Callable[[Result], list[str]]) -> list[list[str]]:
        return _rows(
            kind, lambda r: [r.case.model, r.case.shape, str(r.case.batch_size), *cells(r)], band
        )

    single = [g for g in groups if g[0].served.spec.scenario == "single_stream"]
    if single:
        out.append(
            Table(
                "Serving generation: SingleStream token latency",
                "One query at a time, each a prompt for every sequence of `batch`, its tokens "
                "streamed: LoadGen's time to first token (TTFT) and time per output token "
                "after it (TPOT), ms, and tokens per second, each with its 95% interval over "
                "runs; verdicts compare the p90s per run.",
                [
                    "model",
                    "shape",
                    "batch",
                    "variant",
                    "TTFT p50 ms",
                    "TTFT p90 ms",
                    "TPOT p50 ms",
                    "TPOT p90 ms",
                    "tokens/s",
                    "LoadGen",
                    "verdict (TTFT p90)",
                    "verdict (TPOT p90)",
                ],
                rows(
                    single,
                    lambda r: [
                        r.case.variant,
                        _pct(r, "ttft", "50.00"),
                        _pct(r, "ttft", "90.00"),
                        _pct(r, "tpot", "50.00"),
                        _pct(r, "tpot", "90.00"),
                        _rate(r.served.tokens_per_s),
                    ],
                ),
            )
        )
    searched = [g for g in groups if g[0].served.spec.searches]
    if searched:
        out.append(
            Table(
                "Serving generation: highest rate under the TTFT and TPOT bounds",
                "MLPerf's Server result for a language model: the highest Poisson rate of "
                "prompts (batched up to `max batch`, which prefill and decode together) whose "
                "TTFT and TPOT percentiles both stay under their bounds, found by bisection in "
                "each run; 95% interval over runs.",
                [
                    "model",
                    "shape",
                    "max batch",
                    "scenario",
                    "variant",
                    "max qps",
                    "TTFT at the percentile, ms",
                    "TPOT at the percentile, ms",
                    "LoadGen",
                    "verdict (max qps)",
                ],
                rows(
                    searched,
                    lambda r: [
                        r.served.spec.label(True),
                        r.case.variant,
                        _max_rate(r),
                        _pct(r, "ttft", _key(r)),
                        _pct(r, "tpot", _key(r)),
                    ],
                ),
            )
        )
    fixed = [
        g for g in groups if g[0].served.spec.scenario == "server" and not g[0].served.spec.searches
    ]
    if fixed:
        out.append(
            Table(
                "Serving generation: token latency at a fixed rate",
                "Poisson arrivals of prompts at the target rate, batched up to `max batch`; "
                "TTFT (queueing included) and TPOT in ms at the median and at the bound's "
                "percentile, tokens per second; 95% intervals over runs.",
                [
                    "model",
                    "shape",
                    "max batch",
                    "scenario",
                    "variant",
                    "tokens/s",
                    "TTFT p50 ms",
                    "TTFT at the percentile, ms",
                    "TPOT p50 ms",
                    "TPOT at the percentile, ms",
                    "LoadGen",
                    "verdict (TTFT)",
                    "verdict (TPOT)",
                ],
                rows(
                    fixed,
                    lambda r: [
                        r.served.spec.label(True),
                        r.case.variant,
                        _rate(r.served.tokens_per_s),
                        _pct(r, "ttft", "50.00"),
                        _pct(r, "ttft", _key(r)),
                        _pct(r, "tpot", "50.00"),
                        _pct(r, "tpot", _key(r)),
                    ],
                ),
            )
        )
    offline = [g for g in groups if g[0].served.spec.scenario == "offline"]
    if offline:
        out.append(
            Table(
                "Serving generation: Offline throughput",
                "All prompts at once, generated in batches of `batch`; tokens per second, 95% "
                "interval over runs.",
                ["model", "shape", "batch", "variant", "tokens/s", "LoadGen", "verdict"],
                rows(
                    offline,
                    lambda r: [r.case.variant, _rate(r.served.tokens_per_s)],
                ),
            )
        )
    return out


def _key(r: Result) -> str:
    """The bound's percentile as LoadGen's log names it ("99.00")."""
    return f"{r.served.spec.bound_percentile * 100:.2f}"


@dataclass(frozen=True)
class CurvePoint:
    variant: str
    panel: str  # model, max batch and bound
    qps: float
    latency_s: float
    valid: bool


def curve(results: Sequence[Result]) -> list[CurvePoint]:
    """Latency at the bound's percentile against the rate, every probe of every run of
    the server scenarios: the latency-throughput curve."""
    points = []
    for r in (r for g in _groups(results) for r in g):
        if r.served.spec.scenario != "server" or r.status != "ok":
            continue
        key = _key(r)
        p = f"p{r.served.spec.bound_percentile * 100:g}"
        bound = f"{p} bound {r.served.spec.bound_s * 1e3:g} ms"
        wait = f"wait {r.served.spec.wait_s * 1e3:g} ms"
        # A generation's queueing shows in its first token: the curve is its TTFT.
        if streaming := streams(r.case):
            bound = f"{p} TTFT against its bound {r.served.spec.ttft_bound_s * 1e3:g} ms"
        panel = f"{r.case.model} max batch {r.case.batch_size}, {bound}, {wait}"
        for run in r.served.runs:
            for t in run.tests:
                values = t.ttft_s if streaming else t.latency_s
                if t.target_qps and key in values:
                    points.append(
                        CurvePoint(
                            r.case.variant, panel, t.target_qps, values[key], t.validity == "VALID"
                        )
                    )
    return points
