"""The worker side of a serving run: the model behind MLPerf LoadGen.

Runs inside a worker process (it imports the framework through its adapter, and
`mlperf_loadgen`). The model is built once per batch size it may run (the scenario's
batch, and for the server's dynamic batcher every power of two below it, a partial
batch padded up to the next), warmed up, and its synthetic inputs stay on the device:
LoadGen's samples carry no data, so a test measures the framework, not data loading.
LoadGen's own cost is measured on a no-op model in the same process and reported.
"""

from __future__ import annotations

import json
import queue
import shutil
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fwbench.case import Case
from fwbench.frameworks.base import Workload
from fwbench.measure import stats
from fwbench.measure.timing import TimingConfig, prepare, run_block
from fwbench.serve.result import PERCENTILES, LoadGenTest
from fwbench.serve.spec import ServeSpec, min_queries

# The QSL's size: samples are indices into nothing (the inputs are bound to the model).
_QSL_SAMPLES = 1024
_KEEP = ("mlperf_log_summary.txt", "mlperf_log_detail.txt")
Complete = Callable[[Sequence[Any]], None]


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


def figures_from_log(
    found: dict[str, Any], scenario: str, target_qps: float | None, wall_s: float, batch: int
) -> LoadGenTest:
    """One test's figures from its detail log (pure; tested on a real log)."""

    def first(key: str) -> Any:
        value = found.get(key)
        return value[0] if isinstance(value, list) else value

    latency = {
        p: float(v) / 1e9
        for p in PERCENTILES
        if (v := first(f"result_{p}_percentile_latency_ns")) is not None
    }
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
    reasons = found.get("result_invalid_reason") or []
    reasons = reasons if isinstance(reasons, list) else [reasons]
    early = first("early_stopping_result")
    mean = first("result_mean_latency_ns")
    count = first("result_query_count")
    return LoadGenTest(
        scenario=scenario,
        target_qps=target_qps,
        validity=str(first("result_validity") or "INVALID"),
        invalid_reasons=tuple(str(r) for r in reasons if r),
        latency_s=latency,
        mean_latency_s=float(mean) / 1e9 if mean is not None else None,
        samples_per_s=rate,
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

    @property
    def param_count(self) -> int:
        return self.workloads[self.sizes[-1]].param_count

    def warm_up(self, timing: TimingConfig) -> float:
        """Warm every batch size up until stable; time each unloaded (a batch alone)."""
        start = time.perf_counter()
        for b, w in self.workloads.items():
            prepare(w.step, w.sync, timing)
            self.latency_s[b] = stats.median(
                [run_block(w.step, w.sync, 1, time.perf_counter) for _ in range(5)]
            )
        return time.perf_counter() - start

    def run(self, n: int) -> None:
        """Run n samples as one batch (padded up to the smallest built size)."""
        w = self.workloads[fitting(self.sizes, n)]
        w.step()
        w.sync()

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

    def __init__(self, log_dir: Path) -> None:
        import mlperf_loadgen as lg

        self.lg = lg
        self.log_dir = log_dir
        self.count = 0

    def settings(self, scenario: str, duration_s: float) -> Any:
        lg = self.lg
        ts = lg.TestSettings()
        ts.scenario = {
            "single_stream": lg.TestScenario.SingleStream,
            "server": lg.TestScenario.Server,
            "offline": lg.TestScenario.Offline,
        }[scenario]
        ts.mode = lg.TestMode.PerformanceOnly
        ts.min_duration_ms = int(duration_s * 1e3)
        # A cap far above the plan, so a misjudged rate ends as INVALID, not a time-out.
        ts.max_duration_ms = int(duration_s * 1e3 * 10 + 60_000)
        ts.min_query_count = 1
        return ts

    def test(
        self, settings: Any, batches: Batches | None, name: str
    ) -> tuple[dict[str, Any], float]:
        """Run one test, the model served by `batches` on this thread (None: a no-op
        model answered inside LoadGen's callback); its detail log's entries, wall time."""
        lg = self.lg
        self.count += 1
        out = self.log_dir / f"{self.count:02d}-{name}"
        out.mkdir(parents=True, exist_ok=True)
        log = lg.LogSettings()
        log.log_output.outdir = str(out)
        log.log_output.copy_summary_to_stdout = False
        issue = batches.issue if batches is not None else self.complete
        sut = lg.ConstructSUT(issue, lambda: None)
        qsl = lg.ConstructQSL(_QSL_SAMPLES, _QSL_SAMPLES, lambda s: None, lambda s: None)
        failed: list[BaseException] = []

        def drive() -> None:
            try:
                lg.StartTestWithLogSettings(sut, qsl, settings, log)
            except BaseException as exc:
                failed.append(exc)
            finally:
                if batches is not None:
                    batches.stop()

        start = time.perf_counter()
        driver = threading.Thread(target=drive, name="fwbench-loadgen", daemon=True)
        driver.start()
        try:
            if batches is not None:
                batches.serve()
        finally:
            driver.join()
            wall = time.perf_counter() - start
            lg.DestroyQSL(qsl)
            lg.DestroySUT(sut)
        if failed:
            raise failed[0]
        found = read_detail_log(out / "mlperf_log_detail.txt")
        if batches is None:
            shutil.rmtree(out, ignore_errors=True)
        else:
            for path in out.iterdir():
                if path.name not in _KEEP:
                    path.unlink()
        return found, wall

    def complete(self, samples: Sequence[Any]) -> None:
        lg = self.lg
        lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples])

    def overhead(self) -> float | None:
        """p50 latency of a model that does nothing, under SingleStream."""
        ts = self.settings("single_stream", 0.3)
        ts.single_stream_expected_latency_ns = 20_000
        ts.min_query_count = 2000
        found, _ = self.test(ts, None, "noop")
        value = found.get("result_50.00_percentile_latency_ns")
        return float(value) / 1e9 if value is not None else None

    def single_stream(self, served: Served, spec: ServeSpec) -> LoadGenTest:
        b = served.sizes[-1]
        ts = self.settings("single_stream", spec.duration_s)
        # LoadGen schedules duration / expected latency queries; a test that finished them
        # early would be INVALID (min duration): expect half the unloaded latency.
        ts.single_stream_expected_latency_ns = max(1, int(served.latency_s[b] * 0.5e9))
        ts.min_query_count = max(64, min_queries(0.9))
        batches = Batches(served, self.complete, 1, 0.0, inputs_per_sample=b)
        found, wall = self.test(ts, batches, "single_stream")
        return figures_from_log(found, "single_stream", None, wall, b)

    def offline(self, served: Served, spec: ServeSpec) -> LoadGenTest:
        b = served.sizes[-1]
        ts = self.settings("offline", spec.duration_s)
        # Likewise: twice the unloaded capacity, so the samples outlast the duration.
        ts.offline_expected_qps = 2 * served.capacity
        found, wall = self.test(ts, Batches(served, self.complete, b, 0.0), "offline")
        return figures_from_log(found, "offline", None, wall, b)

    def server(self, served: Served, spec: ServeSpec, qps: float) -> LoadGenTest:
        ts = self.settings("server", spec.duration_s)
        ts.server_target_qps = qps
        ts.server_target_latency_ns = int(spec.bound_s * 1e9)
        ts.server_target_latency_percentile = spec.bound_percentile
        # Enough queries for early stopping to accept the percentile at all.
        ts.min_query_count = min_queries(spec.bound_percentile)
        batches = Batches(served, self.complete, served.sizes[-1], spec.wait_s)
        found, wall = self.test(ts, batches, f"server-{qps:.4g}qps")
        return figures_from_log(found, "server", qps, wall, served.sizes[-1])


class Batches:
    """A dynamic batcher on the calling thread: LoadGen's callback queues samples; `serve`
    runs up to `max_batch` of them at once, as soon as the batch is full or the first has
    waited `max_wait_s`, until `stop`. A sample is `inputs_per_sample` inputs."""

    def __init__(
        self,
        served: Served,
        complete: Complete,
        max_batch: int,
        max_wait_s: float,
        inputs_per_sample: int = 1,
    ) -> None:
        self.served, self.complete = served, complete
        self.max_batch, self.max_wait_s = max_batch, max_wait_s
        self.inputs_per_sample = inputs_per_sample
        self.queue: queue.Queue[Any] = queue.Queue()

    def issue(self, samples: Sequence[Any]) -> None:
        for sample in samples:
            self.queue.put(sample)

    def stop(self) -> None:
        self.queue.put(None)

    def serve(self) -> None:
        error: BaseException | None = None
        while True:
            first = self.queue.get()
            if first is None:
                break
            batch = [first]
            deadline = time.perf_counter() + self.max_wait_s
            done = False
            while len(batch) < self.max_batch:
                try:
                    item = self.queue.get(timeout=max(0.0, deadline - time.perf_counter()))
                except queue.Empty:
                    break
                if item is None:
                    done = True
                    break
                batch.append(item)
            if error is None:
                try:
                    self.served.run(len(batch) * self.inputs_per_sample)
                except Exception as exc:  # LoadGen still needs its answers to finish
                    error = exc
            self.complete(batch)
            if done:
                break
        if error is not None:
            raise error


def search(probe: Callable[[float], LoadGenTest], capacity: float, steps: int) -> list[LoadGenTest]:
    """Bisect the server's rate between 0 and just above the unloaded capacity; every
    probe is kept (they are the latency-throughput curve). Pure but for `probe`."""
    low, high = 0.0, capacity * 1.1
    rate = capacity * 0.5
    probes = []
    for _ in range(steps):
        found = probe(rate)
        probes.append(found)
        if found.validity == "VALID":
            low = rate
        else:
            high = rate
        rate = (low + high) / 2
    return probes


def run_scenario(lg: LoadGen, served: Served, spec: ServeSpec) -> dict[str, Any]:
    """The scenario's tests in one run: ServingRun's test fields."""
    if spec.scenario == "single_stream":
        return {"tests": [lg.single_stream(served, spec)], "main": 0}
    if spec.scenario == "offline":
        return {"tests": [lg.offline(served, spec)], "main": 0}
    unloaded = served.latency_s[served.sizes[0]]
    if unloaded > spec.bound_s:
        return {
            "invalid_reason": f"the bound {spec.bound_s * 1e3:g} ms is below the unloaded "
            f"latency of one sample ({unloaded * 1e3:.3g} ms): no rate and no batch size can "
            "meet it"
        }
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
            "invalid_reason": f"no rate tried met p{spec.bound_percentile * 100:g} <= "
            f"{spec.bound_s * 1e3:g} ms; the lowest, {lowest.target_qps:.4g} qps: {reasons}",
        }
    best = max(valid, key=lambda i: probes[i].target_qps or 0.0)
    return {"tests": probes, "main": best, "max_qps": probes[best].target_qps}
