"""Every decoder family fwbench holds, in every framework that runs it, from one set of
weights: do the four frameworks generate the same tokens, count the same parameters, and
which is faster per output token on this machine?

One sweep: each family's tiny configuration (`hf:ARCH@tiny`: 2 layers, 64 wide, a
vocabulary of 512) in PyTorch (transformers), TensorFlow, JAX and PyTorch through Keras 3
(keras-hub), and in Flax NNX where fwbench's Flax decoder runs the family (a second
sweep into the same results), each in its default mode, an 8-token prompt and 16 new
tokens, batch 1.
Prints per family each framework's time to first token and time per output token
(median over runs, 95% interval), whether its tokens and parameters match PyTorch's,
and the verdict on time per output token.

    cd benchmarks && ../.venv/bin/python llm_families.py [--families llama gemma3 ...]
        [--runs 3] [--new-tokens 16] [--no-flax]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fwbench.models.sources.hf import ARCHS, FLAX
from fwbench.report.summary import summarise
from fwbench.store.db import ResultStore

FRAMEWORKS = ["torch", "tensorflow", "keras-jax", "keras-torch"]


def main() -> int:
    keras = [name for name, arch in ARCHS.items() if arch.keras_hub and arch.tiny]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", nargs="+", default=keras)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--no-flax", action="store_true", help="the Keras frameworks only")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="fwbench-llm-"))
    db = folder / "llm.duckdb"
    flax = [f for f in args.families if (ARCHS[f].model_type or f) in FLAX]
    sweeps = [(FRAMEWORKS, args.families)] + (
        [] if args.no_flax or not flax else [(["flax"], flax)]
    )
    started = time.monotonic()
    for frameworks, families in sweeps:
        spec = folder / f"llm-{frameworks[0]}.yaml"
        spec.write_text(
            "name: llm-families\n"
            f"framework: [{', '.join(frameworks)}]\n"
            f"model: [{', '.join(f'hf:{f}@tiny' for f in families)}]\n"
            "task: generate\n"
            f"new_tokens: {args.new_tokens}\n"
            "batch_size: 1\n"
            "input_shape: input_ids=Bx8\n"
            f"timing: {{min_runs: {args.runs}, max_runs: {args.runs}, run_time_s: 1}}\n"
        )
        subprocess.run(
            [sys.executable, "-m", "fwbench", "sweep", str(spec), "--db", str(db)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    took = time.monotonic() - started
    with ResultStore(db, read_only=True) as store:
        results = store.results()
    print(f"{len(results)} cases in {took / 60:.1f} min ({db})")
    head = "family     framework    TTFT ms            TPOT ms            tokens  params"
    for family in args.families:
        mine = [r for r in results if r.case.model == f"hf:{family}@tiny"]
        print(f"\n{head}")
        reference = next((r for r in mine if r.case.framework == "torch"), None)
        for r in mine:
            if r.measurement is None:
                print(f"{family:10} {r.case.framework:12} {r.status}: {r.error}")
                continue
            fig = r.measurement.figures
            ttft, tpot = fig["ttft_s"], fig["tpot_s"]
            same = reference is not None and r.settings.get("generated_tokens") == (
                reference.settings.get("generated_tokens")
            )
            params = reference is not None and r.param_count == reference.param_count
            print(
                f"{family:10} {r.case.framework:12} "
                f"{ttft.median * 1e3:6.2f} ({ttft.ci_low * 1e3:.2f}-{ttft.ci_high * 1e3:.2f})  "
                f"{tpot.median * 1e3:6.2f} ({tpot.ci_low * 1e3:.2f}-{tpot.ci_high * 1e3:.2f})  "
                f"{'same' if same else 'DIFFER':6}  {'same' if params else 'DIFFER'}"
            )
        _, rows = summarise(mine)
        for row in rows:
            print(f"  verdict on time per output token: {row.verdict(short=True)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
