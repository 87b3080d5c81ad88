"""Flax NNX's ways of writing a training step against Keras on JAX and PyTorch: does
Flax's documented fast path (`nnx.split` once, `jax.jit` over `nnx.merge`: mode `jit`)
beat plain `nnx.jit` (mode `nnx-jit`), and where does native JAX stand against Keras 3
on JAX's backend (`keras-jax`, jit) and PyTorch (eager), for the same network?

One sweep, alternated in rounds: ResNet-18 training at two batch sizes (runs a side as
given), then per batch size each variant's median step time with its 95% interval, and
the verdict of the fastest against each other variant. A decoder (`--model gpt2`) is
measured on its sequence length instead of an image size, and `--task generate` times
its greedy generations (`--new-tokens`) from the weights every framework loads.

    cd benchmarks && ../.venv/bin/python flax_modes.py [--batch 2 8] [--input-size 64]
        [--runs 3] [--model resnet18] [--task train]
    cd benchmarks && ../.venv/bin/python flax_modes.py --model gpt2 --task generate \
        --batch 1 4 --seq-len 32 --new-tokens 16
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fwbench.measure.verdicts import comparison_of
from fwbench.report.summary import summarise
from fwbench.store.db import ResultStore

# Flax's fast path against plain nnx.jit; native Flax against Keras on JAX.
PAIRS = [("flax/jit", "flax/nnx-jit"), ("flax/jit", "keras-jax/jit")]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", nargs="+", type=int, default=[2, 8])
    parser.add_argument("--input-size", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--model", default="resnet18")
    parser.add_argument("--task", default="train", choices=["train", "infer", "generate"])
    parser.add_argument("--seq-len", type=int, default=32, help="a decoder's prompt / sequence")
    parser.add_argument("--new-tokens", type=int, default=16, help="a generation's tokens")
    parser.add_argument("--db", type=Path, help="read this sweep's results instead of running")
    args = parser.parse_args()
    if args.db is not None:
        return show(args, args.db, None)
    folder = Path(tempfile.mkdtemp(prefix="fwbench-flax-"))
    spec = folder / "flax.yaml"
    spec.write_text(
        "name: flax-modes\n"
        "framework: [flax, keras-jax, torch]\n"
        "mode: {flax: [jit, nnx-jit], keras-jax: jit, torch: eager}\n"
        f"model: {args.model}\n"
        f"task: {args.task}\n"
        f"batch_size: [{', '.join(map(str, args.batch))}]\n"
        + _dims(args)
        + f"timing: {{min_runs: {args.runs}, max_runs: {args.runs}, run_time_s: 1}}\n"
    )
    db = folder / "flax.duckdb"
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "fwbench", "sweep", str(spec), "--db", str(db)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return show(args, db, time.monotonic() - started)


def _dims(args: argparse.Namespace) -> str:
    if args.model.startswith("gpt2"):
        new = f"new_tokens: {args.new_tokens}\n" if args.task == "generate" else ""
        return f"seq_len: {args.seq_len}\n{new}"
    return f"input_size: {args.input_size}\nnum_classes: 10\n"


def show(args: argparse.Namespace, db: Path, took: float | None) -> int:
    with ResultStore(db, read_only=True) as store:
        results = store.results()
    print(f"{len(results)} cases" + (f" in {took / 60:.1f} min" if took else "") + f" ({db})")
    for batch in args.batch:
        mine = [r for r in results if r.case.batch_size == batch]
        shape = mine[0].case.shape if mine else ""
        print(f"\n{args.model} {args.task}, batch {batch}, {shape}:")
        for r in mine:
            if r.measurement is None:
                print(f"  {r.case.variant:18} {r.status}: {r.error}")
                continue
            t = r.measurement.step_time_s
            print(
                f"  {r.case.variant:18} {t.median * 1e3:8.2f} ms "
                f"({t.ci_low * 1e3:.2f}-{t.ci_high * 1e3:.2f})  params {r.param_count:,}"
            )
        _, rows = summarise(mine)
        for row in rows:
            print(f"  fastest: {row.verdict(short=True)}")
        named = {r.case.variant: r for r in mine if r.measurement is not None}
        pairs = [p for p in PAIRS if p[0] in named and p[1] in named]
        for verdict in comparison_of(named, "given", pairs).verdicts():
            print(f"  {verdict.text()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
