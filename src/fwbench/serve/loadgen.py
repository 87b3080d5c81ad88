"""The worker side of a serving run: the model behind MLPerf LoadGen.

Runs inside a worker process (it imports the framework through its adapter, and
`mlperf_loadgen`). The model is built once per batch size it may run (the scenario's
batch, and for the server's dynamic batcher every power of two below it, a partial
batch padded up to the next), warmed up, and its synthetic inputs stay on the device:
LoadGen's samples carry no data, so a test measures the framework, not data loading.
LoadGen's own cost is measured on a no-op model in the same process and reported.

A streaming task (a generation) is served with LoadGen's token latencies: the model
answers a query's first token as soon as it is on the host (`FirstTokenComplete`) and
the whole query with its token count, and LoadGen reports the time to first token and
the time per output token after it, and holds the server's rate to bounds on both.
"""

from __future__ import annotations

import json
import math
import queue
import shutil
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from fwbench.case import Case
from fwbench.frameworks.base import Workload
from fwbench.measure import stats
from fwbench.measure.timing import RunTiming, prepare, run_block
from fwbench.scenario.record import PERCENTILES, LoadGenTest
from fwbench.scenario.spec import ServeSpec, min_queries
from fwbench.tasks import find_task

# The QSL's size: samples are indices into nothing (the inputs are bound to the model).
_QSL_SAMPLES = 1024
_KEEP = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
Complete = Callable[[Sequence[Any]], None]
# Runs n inputs; a streaming model calls the second argument when its first output is
# on the host.
Run = Callable[[int, Callable[[], None] | None], None]


def ladder(batch_size: int, scenario: str) -> list[int]:
    """Batch sizes to build: the scenario's batch, and below it for the server's batcher."""
    if scenario != "server":
        return [batch_size]
    sizes = [1 << i for i in range(batch_size.bit_length()) if (1 << i) < batch_size]
    return [*sizes, batch_size]


def fitting(sizes: Sequence[int], n: int) -> int:
    """The smallest built batch that holds n samples."""
    return next(b for b in sizes if b >= n)


def read_detail_log(path: Path) -> dict[str, Any]:
    """LoadGen's detail log: `:::MLLOG {json}` lines, key -> value (repeated keys: a list)."""
    found: dict[str, Any] = {}
    for line in path.read_text(errors="replace").splitlines():
        _, sep, payload = line.partition(":::MLLOG ")
        if not sep:
            continue
        entry = json.loads(payload)
        key, value = entry.get("key"), entry.get("value")
        if key in found:
            before = found[key]
            found[key] = [*before, value] if isinstance(before, list) else [before, value]
        else:
            found[key] = value
    return found


def _bare_tokens_rate(bare: Any, completed: float) -> float:
    """A single stream's tokens per second without LoadGen's overhead, as its samples per
    second are (1 / the mean latency): tokens / (mean latency x queries), which LoadGen
    writes as `result_token_throughput`, per nanosecond (it divides by the latency in
    ns). Its completed tokens per second (`completed`) count the time between queries
    too: 1% apart on an idle host, 7% on a loaded one, so that tokens per second would
    not be the tokens of a query times its samples per second. The unit is read by which
    of the two scales lands near `completed`, so a LoadGen that writes it per second is
    read as well; `completed` where LoadGen writes none."""
    if bare is None or float(bare) <= 0 or completed <= 0:
        return completed
    return min(
        (float(bare) * scale for scale in (1.0, 1e9)), key=lambda r: abs(math.log(r / completed))
    )


def figures_from_log(
    found: dict[str, Any], scenario: str, target_qps: float | None, wall_s: float, batch: int
) -> LoadGenTest:
    """One test's figures from its detail log (pure; tested on a real log)."""

    def first(key: str) -> Any:
        value = found.get(key)
        return value[0] if isinstance(value, list) else value

    def percentiles(pattern: str) -> dict[str, float]:
        return {
            p: float(v) / 1e9 for p in PERCENTILES if (v := first(pattern.format(p))) is not None
        }

    latency = percentiles("result_{}_percentile_latency_ns")
    # Token latencies (a streaming model's): LoadGen's time per output token of a query
    # is (its latency - its first token's) / (its tokens - 1).
    ttft = percentiles("result_first_token_{}_percentile_latency_ns")
    tpot = percentiles("result_time_per_output_token_{}_percentile_ns")
    tokens_rate = None
    if first("requested_use_token_latencies"):
        tokens_rate = next(
            (
                v
                for k in ("result_completed_tokens_per_second", "result_tokens_per_second")
                if (v := first(k)) is not None
            ),
            None,
        )
    if tokens_rate is not None and scenario == "single_stream":
        tokens_rate = _bare_tokens_rate(first("result_token_throughput"), float(tokens_rate))
        tokens_rate *= batch  # a query carries a batch of prompts
    rate = next(
        (
            float(v)
            for k in (
                "result_completed_samples_per_sec",
                "result_samples_per_second",
                "result_qps_without_loadgen_overhead",
            )
            if (v := first(k)) is not None
        ),
        None,
    )
    if rate is not None and scenario == "single_stream":
        rate *= batch  # a query carries a batch: samples are its inputs
    given = found.get("result_invalid_reason") or []
    reasons = [str(r) for r in (given if isinstance(given, list) else [given]) if r]
    # A generation's test (token latencies) says it of its first token's latency and of
    # its time per output token apart.
    per_token = (("early_stopping_ttft_result", "TTFT"), ("early_stopping_tpot_result", "TPOT"))
    early = first("early_stopping_result") or "; ".join(
        f"{what}: {' '.join(str(said).split())}" for key, what in per_token if (said := first(key))
    )
    # LoadGen writes no reason when only early stopping failed: say which check failed.
    checks = (
        ("result_perf_constraints_met", "the latency bound was not met"),
        ("result_min_duration_met", "the minimum duration was not met"),
        ("result_min_queries_met", "the minimum query count was not met"),
        ("early_stopping_met", "early stopping could not accept the percentile"),
    )
    reasons += [why for key, why in checks if first(key) is False]
    if first("early_stopping_met") is False and early:
        reasons.append(" ".join(str(early).split()))
    mean = first("result_mean_latency_ns")
    count = first("result_query_count")
    mean_ttft = first("result_first_token_mean_latency_ns")
    mean_tpot = first("result_time_to_output_token_mean")
    return LoadGenTest(
        scenario=scenario,
        target_qps=target_qps,
        validity=str(first("result_validity") or "INVALID"),
        invalid_reasons=tuple(dict.fromkeys(reasons)),
        latency_s=latency,
        mean_latency_s=float(mean) / 1e9 if mean is not None else None,
        samples_per_s=rate,
        ttft_s=ttft,
        tpot_s=tpot,
        mean_ttft_s=float(mean_ttft) / 1e9 if ttft and mean_ttft is not None else None,
        mean_tpot_s=float(mean_tpot) / 1e9 if tpot and mean_tpot is not None else None,
        tokens_per_s=float(tokens_rate) if tokens_rate is not None else None,
        query_count=int(count) if count is not None else None,
        early_stopping=" ".join(str(early).split()) if early else None,
        wall_s=wall_s,
    )


class Served:
    """The model(s) of one case, ready for LoadGen: one workload per batch size."""

    def __init__(self, build: Callable[[Case], Workload], case: Case, scenario: str) -> None:
        self.case = case
        self.sizes = ladder(case.batch_size, scenario)
        self.workloads = {b: build(case.model_copy(update={"batch_size": b})) for b in self.sizes}
        self.latency_s: dict[int, float] = {}
        # A streaming task's tokens per sample (a generation's new tokens); None otherwise.
        # (A streaming task names its units_from: tasks.Task checks it.)
        task = find_task(case.task)
        units = task.units_from if task is not None and task.streams else None
        self.tokens = case.task_values[units] if units else None
        # Its own figures (a generation's TTFT and TPOT), unloaded, per batch size.
        self.unloaded: dict[int, dict[str, float]] = {}

    @property
    def param_count(self) -> int:
        return self.workloads[self.sizes[-1]].param_count

    def settings(self) -> dict[str, Any]:
        """The settings as applied (precision, layout, ...), as the workloads record them."""
        return self.workloads[self.sizes[-1]].settings()

    def warm_up(self, timing: RunTiming) -> float:
        """Warm every batch size up until stable; time each unloaded (a batch alone)."""
        start = time.perf_counter()
        for b, w in self.workloads.items():
            prepare(w.step, w.sync, timing)
            w.figures()  # the warmup's: dropped
            self.latency_s[b] = stats.median(
                [run_block(w.step, w.sync, 1, time.perf_counter) for _ in range(5)]
            )
            self.unloaded[b] = w.figures()
        return time.perf_counter() - start

    def run(self, n: int, first: Callable[[], None] | None = None) -> None:
        """Run n samples as one batch (padded up to the smallest built size); a streaming
        model calls `first` when the batch's first tokens are on the host."""
        w = self.workloads[fitting(self.sizes, n)]
        w.first_output = first
        try:
            w.step()
            w.sync()
        finally:
            w.first_output = None

    @property
    def capacity(self) -> float:
        """Samples per second at the largest batch, unloaded: where a rate search starts."""
        b = self.sizes[-1]
        return b / self.latency_s[b]


class LoadGen:
    """LoadGen tests, each logged into its own directory.

    LoadGen runs in a thread of its own and the model on the main thread: PyTorch's
    intra-op pool is slower driven from another thread (measured here: ResNet-18 at
    batch 1, 14.1 ms against 10.1 ms), and a worker measures the framework as a plain
    loop would call it.
    """

    def __init__(self, log_dir: Path, seed: int = 0) -> None:
        import mlperf_loadgen as lg

        self.lg = lg
        self.log_dir = log_dir
        self.count = 0
        self.seed = seed

    def settings(
        self,
        scenario: str,
        duration_s: float,
        queries: int = 1,
        rate: float = 0,
        tokens: bool = False,
    ) -> Any:
        """Settings of a test of `duration_s` and at least `queries` queries (at `rate`
        queries per second, where LoadGen sets the pace); `tokens`: LoadGen's token
        latencies (a streaming model)."""
        lg = self.lg
        ts = lg.TestSettings()
        ts.use_token_latencies = tokens
        ts.scenario = {
            "single_stream": lg.TestScenario.SingleStream,
            "server": lg.TestScenario.Server,
            "offline": lg.TestScenario.Offline,
        }[scenario]
        ts.mode = lg.TestMode.PerformanceOnly
        # The run's own arrivals: with LoadGen's one default seed every run drew the same
        # Poisson schedule, whose offered rate sat up to 10% off its target alike in
        # each, and the interval over runs could not show it.
        ts.schedule_rng_seed = ts.sample_index_rng_seed = ts.qsl_rng_seed = self.seed
        ts.min_duration_ms = int(duration_s * 1e3)
        ts.min_query_count = queries
        # A cap far above the plan (the duration, or the queries at the rate when they
        # take longer), so a misjudged rate ends as INVALID, not as a time-out, and a low
        # rate is never INVALID for want of time.
        planned = max(duration_s, queries / rate if rate > 0 else 0.0)
        ts.max_duration_ms = int((planned * 3 + 60) * 1e3)
        return ts

    def test(
        self, settings: Any, batches: Batches, name: str, keep: bool = True
    ) -> tuple[dict[str, Any], float]:
        """Run one test, the model served by `batches` on this thread; its detail log's
        entries and its wall time."""
        lg = self.lg
        self.count += 1
        out = self.log_dir / f"{self.count:02d}-{name}"
        out.mkdir(parents=True, exist_ok=True)
        log = lg.LogSettings()
        log.log_output.outdir = str(out)
        log.log_output.copy_summary_to_stdout = False
        log.enable_trace = False  # its logger thread would compete with the model
        sut = lg.ConstructSUT(batches.issue, lambda: None)
        qsl = lg.ConstructQSL(_QSL_SAMPLES, _QSL_SAMPLES, lambda s: None, lambda s: None)
        failed: list[BaseException] = []

        def drive() -> None:
            try:
                lg.StartTestWithLogSettings(sut, qsl, settings, log)
            except BaseException as exc:
                failed.append(exc)
            finally:
                batches.stop()

        start = time.perf_counter()
        driver = threading.Thread(target=drive, name="fwbench-loadgen", daemon=True)
        driver.start()
        try:
            batches.serve()
        finally:
            # serve() answers every query it took, so LoadGen finishes; the join's limit
            # only guards against a LoadGen that does not.
            driver.join(timeout=settings.max_duration_ms / 1e3 + 60)
            wall = time.perf_counter() - start
            if not driver.is_alive():
                lg.DestroyQSL(qsl)
                lg.DestroySUT(sut)
        if driver.is_alive():
            raise RuntimeError(f"LoadGen's test {name} did not finish")
        if failed:
            raise failed[0]
        found = read_detail_log(out / "mlperf_log_detail.txt")
        if not keep:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for path in out.iterdir():
                if path.name not in _KEEP:
                    path.unlink()
        return found, wall

    def complete(self, samples: Sequence[Any], tokens: int | None = None) -> None:
        """Answer samples whole; a streaming model's with the tokens each made (LoadGen's
        time per output token divides by them)."""
        lg = self.lg
        if tokens is None:
            lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples])
        else:
            lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0, tokens) for s in samples])

    def first_token(self, samples: Sequence[Any]) -> None:
        lg = self.lg
        lg.FirstTokenComplete([lg.QuerySampleResponse(s.id, 0, 0, 1) for s in samples])

    def batches(self, served: Served, max_batch: int, wait_s: float, inputs: int = 1) -> Batches:
        """The batcher that serves `served`, answering as its model does (whole, or its
        first token and then whole)."""
        if served.tokens is None:
            return Batches(served.run, self.complete, max_batch, wait_s, inputs_per_sample=inputs)
        return Batches(
            served.run,
            partial(self.complete, tokens=served.tokens),
            max_batch,
            wait_s,
            inputs_per_sample=inputs,
            first=self.first_token,
        )

    def overhead(self) -> float | None:
        """p50 latency of a model that does nothing, served the way a real one is (the
        callback, the queue, the main thread's answer): what the harness adds."""
        ts = self.settings("single_stream", 0.3, queries=2000)
        ts.single_stream_expected_latency_ns = 20_000
        noop = Batches(lambda n, first: None, self.complete, 1, 0.0)
        found, _ = self.test(ts, noop, "noop", False)
        value = found.get("result_50.00_percentile_latency_ns")
        return float(value) / 1e9 if value is not None else None

    def single_stream(self, served: Served, spec: ServeSpec) -> LoadGenTest:
        b = served.sizes[-1]
        # 64 queries at least: LoadGen's early stopping needs as many for a stream's
        # token latencies as for the p90 latency.
        ts = self.settings(
            "single_stream",
            spec.duration_s,
            queries=max(64, min_queries(0.9)),
            tokens=served.tokens is not None,
        )
        # LoadGen schedules duration / expected latency queries; a test that finished them
        # early would be INVALID (min duration). It stops issuing once the duration and
        # the query count are met, so expecting less costs only the schedule's memory:
        # a tenth of the unloaded latency, which a busy machine can inflate (a CI run:
        # 5.7 ms unloaded, then a 1.8 ms p50 served; INVALID expecting half of 5.7 ms).
        ts.single_stream_expected_latency_ns = max(1, int(served.latency_s[b] * 0.1e9))
        ts.max_duration_ms = max(
            ts.max_duration_ms, int(ts.min_query_count * served.latency_s[b] * 3e3)
        )
        found, wall = self.test(ts, self.batches(served, 1, 0.0, inputs=b), "single_stream")
        return figures_from_log(found, "single_stream", None, wall, b)

    def offline(self, served: Served, spec: ServeSpec) -> LoadGenTest:
        b = served.sizes[-1]
        ts = self.settings("offline", spec.duration_s, tokens=served.tokens is not None)
        # Likewise: twice the unloaded capacity, so the samples outlast the duration.
        ts.offline_expected_qps = 2 * served.capacity
        found, wall = self.test(ts, self.batches(served, b, 0.0), "offline")
        return figures_from_log(found, "offline", None, wall, b)

    def server(self, served: Served, spec: ServeSpec, qps: float) -> LoadGenTest:
        # Enough queries for early stopping to accept the percentile at all.
        queries = min_queries(spec.bound_percentile)
        tokens = served.tokens is not None
        ts = self.settings("server", spec.duration_s, queries=queries, rate=qps, tokens=tokens)
        ts.server_target_qps = qps
        ts.server_target_latency_percentile = spec.bound_percentile
        if tokens:
            # LoadGen holds a stream's first token and each later one to the percentile.
            ts.ttft_latency = int(spec.ttft_bound_s * 1e9)
            ts.tpot_latency = int(spec.tpot_bound_s * 1e9)
        else:
            ts.server_target_latency_ns = int(spec.bound_s * 1e9)
        batches = self.batches(served, served.sizes[-1], spec.wait_s)
        found, wall = self.test(ts, batches, f"server-{qps:.4g}qps")
        return figures_from_log(found, "server", qps, wall, served.sizes[-1])


class Batches:
    """A dynamic batcher on the calling thread. LoadGen's callback queues each query's
    samples with their arrival time; `serve` runs up to `max_batch` samples at once, as
    soon as the batch is full or its oldest sample has waited `max_wait_s`, until
    `stop`. A sample is `inputs_per_sample` inputs; `run(n, on_first)` runs n inputs.
    Given `first`, the batch's samples are answered their first token when the model
    calls `on_first` (a generation's batch decodes together: static batching), and
    whole when it returns.

    Every sample taken is answered, even when the model fails (the first error is raised
    once LoadGen has all its answers), so a failure never leaves LoadGen waiting."""

    def __init__(
        self,
        run: Run,
        complete: Complete,
        max_batch: int,
        max_wait_s: float,
        inputs_per_sample: int = 1,
        first: Complete | None = None,
    ) -> None:
        self.run, self.complete, self.first = run, complete, first
        self.max_batch, self.max_wait_s = max_batch, max_wait_s
        self.inputs_per_sample = inputs_per_sample
        self.queue: queue.Queue[tuple[float, list[Any]] | None] = queue.Queue()

    def issue(self, samples: Sequence[Any]) -> None:
        # One item per query: an Offline query's samples arrive together, never split.
        self.queue.put((time.perf_counter(), list(samples)))

    def stop(self) -> None:
        self.queue.put(None)

    def serve(self) -> None:
        error: BaseException | None = None
        waiting: deque[tuple[float, Any]] = deque()
        stopped = False
        while not (stopped and not waiting):
            if not waiting:
                item = self.queue.get()
                if item is None:
                    break
                waiting.extend((item[0], sample) for sample in item[1])
            # Fill the batch until it is full or its oldest sample has waited enough.
            while len(waiting) < self.max_batch and not stopped:
                left = waiting[0][0] + self.max_wait_s - time.perf_counter()
                try:
                    item = (
                        self.queue.get(timeout=max(0.0, left))
                        if left > 0
                        else self.queue.get_nowait()
                    )
                except queue.Empty:
                    break
                if item is None:
                    stopped = True
                else:
                    waiting.extend((item[0], sample) for sample in item[1])
            batch = [waiting.popleft()[1] for _ in range(min(self.max_batch, len(waiting)))]
            try:
                if error is None:
                    on_first = partial(self.first, batch) if self.first is not None else None
                    self.run(len(batch) * self.inputs_per_sample, on_first)
            except BaseException as exc:  # answered below all the same
                error = exc
            finally:
                self.complete(batch)
        if error is not None:
            raise error


def search(probe: Callable[[float], LoadGenTest], capacity: float, steps: int) -> list[LoadGenTest]:
    """The server's highest rate under its bounds: from half the unloaded capacity, then
    just above it, then twice the rate while every rate meets the bounds; then bisect
    between the last that met them and the first that did not. The capacity is only a
    start: it is measured on a few unloaded steps right after warmup, and a dynamic
    batcher, or a generation whose tokens stream, may serve far more (a search that
    stopped at 1.1x it found a generation a seventh of its rate). Every probe is kept:
    they are the latency-throughput curve. Pure but for `probe`."""
    low, high = 0.0, None
    ceiling = capacity * 1.1
    rate = capacity * 0.5
    probes = []
    for _ in range(steps):
        found = probe(rate)
        probes.append(found)
        if found.validity == "VALID":
            low = rate
        else:
            high = rate
        if high is not None:
            rate = (low + high) / 2
        elif rate < ceiling:  # no rate has missed yet: look higher
            rate = ceiling
        else:
            rate = 2 * rate
    return probes


def unmeetable(served: Served, spec: ServeSpec) -> str | None:
    """Why no rate can meet the server's bounds, when a query alone, unloaded, misses
    one (the smallest batch, which a lone query runs in); None when one might."""
    b = served.sizes[0]
    checks: list[tuple[str, float, float | None, str]]
    if served.tokens is None:
        checks = [("bound", spec.bound_s, served.latency_s[b], "latency of one sample")]
    else:
        figures = served.unloaded.get(b, {})
        checks = [
            ("TTFT bound", spec.ttft_bound_s, figures.get("ttft_s"), "time to first token"),
            ("TPOT bound", spec.tpot_bound_s, figures.get("tpot_s"), "time per output token"),
        ]
    for name, bound, unloaded, what in checks:
        if unloaded is not None and unloaded > bound:
            return (
                f"the {name} {bound * 1e3:g} ms is below the unloaded {what} "
                f"({unloaded * 1e3:.3g} ms): no rate and no batch size can meet it"
            )
    return None


def bounds_text(served: Served, spec: ServeSpec) -> str:
    p = f"p{spec.bound_percentile * 100:g}"
    if served.tokens is None:
        return f"{p} <= {spec.bound_s * 1e3:g} ms"
    return f"{p} TTFT <= {spec.ttft_bound_s * 1e3:g} ms and TPOT <= {spec.tpot_bound_s * 1e3:g} ms"


def run_scenario(lg: LoadGen, served: Served, spec: ServeSpec) -> dict[str, Any]:
    """The scenario's tests in one run: ServingRun's test fields."""
    if spec.scenario == "single_stream":
        return {"tests": [lg.single_stream(served, spec)], "main": 0}
    if spec.scenario == "offline":
        return {"tests": [lg.offline(served, spec)], "main": 0}
    reason = unmeetable(served, spec)
    if reason is not None:
        return {"invalid_reason": reason}
    if not spec.searches:
        assert spec.target_qps is not None
        return {"tests": [lg.server(served, spec, spec.target_qps)], "main": 0}
    probes = search(lambda q: lg.server(served, spec, q), served.capacity, spec.steps)
    valid = [i for i, t in enumerate(probes) if t.validity == "VALID"]
    if not valid:
        lowest = min(probes, key=lambda t: t.target_qps or 0.0)
        reasons = "; ".join(lowest.invalid_reasons) or "INVALID"
        return {
            "tests": probes,
            "invalid_reason": f"no rate tried met {bounds_text(served, spec)}; the lowest, "
            f"{lowest.target_qps:.4g} qps: {reasons}",
        }
    best = max(valid, key=lambda i: probes[i].target_qps or 0.0)
    target = probes[best].target_qps or 0.0
    # Its rate is what it completed at that target (MLPerf's Server result): a short
    # Poisson schedule offers less or more than the rate it aims at (143.9 scheduled of
    # a 153.7 target in one log, 141.2 completed).
    rate = probes[best].samples_per_s or target
    above = [t.target_qps for t in probes if t.target_qps and t.target_qps > target]
    found: dict[str, Any] = {"tests": probes, "main": best, "max_qps": rate}
    if above:
        # The bracket's next rate on the same scale: its ratio to the best is the
        # search's resolution.
        found["max_qps_above"] = min(above) * rate / target
    else:
        found["warnings"] = [
            f"every rate tried met the bound, the highest {rate:.4g} qps "
            f"({rate / served.capacity:.3g}x the unloaded capacity, after {len(probes)} "
            "rates): the highest rate lies above it; more search steps would find it"
        ]
    return found
