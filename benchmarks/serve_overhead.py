"""Does LoadGen add measurable latency? A no-op model, and a real one with and without it.

In one process per framework (as a serving run is): LoadGen's SingleStream p50 on a
model that does nothing, then the same model's SingleStream p50 under LoadGen against a
plain loop of the same steps, alternated `--rounds` times. Prints each pair and the
median ratio (LoadGen / plain loop).

    cd benchmarks && ../.venv/bin/python serve_overhead.py [--framework torch]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from fwbench.case import Case
from fwbench.frameworks import load_adapter
from fwbench.measure import stats
from fwbench.measure.settings import TimingConfig
from fwbench.scenario.spec import ServeSpec
from fwbench.serve.loadgen import LoadGen, Served


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", default="torch")
    p.add_argument("--mode", default=None)
    p.add_argument("--model", default="resnet18")
    p.add_argument("--input-size", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--duration", type=float, default=2.0)
    a = p.parse_args()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(a.threads))
    case = Case.build(
        framework=a.framework, mode=a.mode, model=a.model, task="infer",
        batch_size=a.batch_size, input_size=a.input_size, threads=a.threads,
    )  # fmt: skip
    adapter = load_adapter(case.framework)
    adapter.configure(case.device, case.threads)
    served = Served(adapter.build, case, "single_stream")
    served.warm_up(TimingConfig().run)
    spec = ServeSpec.build(scenario="single_stream", duration_s=a.duration)
    with tempfile.TemporaryDirectory() as tmp:
        lg = LoadGen(Path(tmp))
        noop = [lg.overhead() or 0.0 for _ in range(a.rounds)]
        print(f"no-op model under LoadGen: p50 {stats.median(noop) * 1e6:.2f} µs (median of "
              f"{a.rounds} tests)")  # fmt: skip
        ratios = []
        for i in range(a.rounds):
            through = lg.single_stream(served, spec).latency_s["50.00"]
            plain = []
            end = time.perf_counter() + a.duration
            while time.perf_counter() < end:
                start = time.perf_counter()
                served.run(a.batch_size)
                plain.append(time.perf_counter() - start)
            direct = stats.median(plain)
            ratios.append(through / direct)
            print(f"round {i + 1}: LoadGen p50 {through * 1e3:.3f} ms, plain loop p50 "
                  f"{direct * 1e3:.3f} ms, ratio {through / direct:.3f}")  # fmt: skip
    print(f"{case.label()}: median ratio LoadGen / plain loop {stats.median(ratios):.3f} over "
          f"{a.rounds} rounds")  # fmt: skip


if __name__ == "__main__":
    main()
