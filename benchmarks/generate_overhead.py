"""Does fwbench time a generation's tokens as its framework's users would?

For each framework in its default mode, fwbench's time per output token (`fwbench run
--task generate`, one run, its `tpot_s`) is set against a generation timed here by
hand, alternated round by round (ABBA) in fresh processes on this machine.

The zoo's GPT-2 (`--model gpt2`) or a decoder of transformers and keras-hub (`--model
hf:llama@tiny`, any `hf:` text), the same weights and prompt on both sides:

- PyTorch, the zoo's GPT-2: a decoding loop written the way its users write one,
  transformers' GPT2LMHeadModel under `torch.inference_mode()`, the prompt once with
  `use_cache=True`, then one token at a time through its key/value cache, each token
  read back as it is made; its time per output token is the median over its
  generations of the mean decoding step after the first token;
- PyTorch, an `hf:` decoder: transformers' `model.generate(max_new_tokens=N,
  min_new_tokens=N)`, greedy;
- Keras (tensorflow, keras-jax, keras-torch), either model (both are keras-hub's):
  keras-hub's `CausalLM.generate()` with the greedy sampler, the prompt padded to
  prompt + N positions (keras-hub's input);
- Flax, either model (fwbench's NNX decoders, from the same weights): a decoding loop
  written as Flax's performance guide writes a step, `nnx.split` once and a `jax.jit`
  function that `nnx.merge`s, through a static cache made per generation and donated,
  each position passed as a Python int, each token read back as it is made.

Ratios are fwbench / hand (above 1: fwbench slower), geometric means over rounds with a
t interval; the target is 1.00 +- 0.03 for the hand loop, 1.00 +- 0.05 for the
libraries' `generate()`. Usage:

    cd benchmarks && ../.venv/bin/python generate_overhead.py [--rounds 3]
        [--framework torch ...] [--model gpt2 | hf:ARCH[@SIZE] | hf:DIR]
        [--batch-size 1] [--seq-len 128] [--new-tokens 32] [--seconds 8]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
from common import against_target

from fwbench.measure.verdicts import ratio

FWBENCH = str(Path(sys.executable).parent / "fwbench")
FRAMEWORKS = ("torch", "tensorflow", "keras-jax", "keras-torch", "flax")
TARGET = 0.03
LIBRARY_TARGET = 0.05


def _library(model: str) -> bool:
    """A decoder of transformers and keras-hub: timed against the libraries' generate()."""
    return model.startswith("hf:")


def _length(args: argparse.Namespace) -> dict[str, Any]:
    """The prompt's length as the model takes it: a dimension of the zoo's GPT-2, the
    input signature of an hf: decoder."""
    if _library(args.model):
        return {"inputs": f"input_ids=Bx{args.seq_len}"}
    return {"seq_len": args.seq_len}


def _case(args: argparse.Namespace) -> Any:
    """The case fwbench's command makes of these arguments (an hf: decoder's inputs as
    the command completes them: its vocabulary bounds the prompt's tokens)."""
    from fwbench.case import Case
    from fwbench.user_models import prepare

    fields: dict[str, Any] = {"model": args.model, "seq_len": args.seq_len}
    if _library(args.model):
        fields = prepare(args.model, [_length(args)["inputs"]]).fields
    return Case.build(
        framework=args.framework, task="generate", batch_size=args.batch_size,
        threads=args.threads, task_dims=f"new_tokens={args.new_tokens}", **fields,
    )  # fmt: skip


# A generation timed by hand: its time to first token and its time per output token.
Timed = Callable[[], tuple[float, float]]


def _per_token(loop: Callable[[], list[float]]) -> Timed:
    """A decoding loop's step times as the time to first token and the mean step after."""

    def timed() -> tuple[float, float]:
        times = loop()
        return times[0], statistics.fmean(times[1:])

    return timed


def _threads(args: argparse.Namespace, framework: str) -> None:
    """The case's threads in this process, as fwbench's worker sets them."""
    if framework in ("keras-jax", "flax"):
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, cores[: args.threads])
        os.environ["JAX_PLATFORMS"] = "cpu"


def _two_lengths(one: Callable[[], Any], many: Callable[[], Any], n: int) -> Timed:
    """A whole-sequence generate() at 1 and at n new tokens, alternated: the time to
    first token and (t(n) - t(1)) / (n - 1)."""

    def timed() -> tuple[float, float]:
        start = time.perf_counter()
        one()
        first = time.perf_counter() - start
        start = time.perf_counter()
        many()
        return first, (time.perf_counter() - start - first) / (n - 1)

    return timed


def transformers_generate(args: argparse.Namespace) -> Timed:
    import torch

    from fwbench.frameworks import generation
    from fwbench.models.sources import hf

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    model: Any = hf.build(args.model.removeprefix("hf:"))
    model.eval()
    model.config.use_cache = True
    ids = torch.from_numpy(generation.prompt(_case(args))).long()
    mask = torch.ones_like(ids)

    def generate(n: int) -> Callable[[], Any]:
        def call() -> Any:
            with torch.inference_mode():
                return model.generate(
                    input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                    do_sample=False, pad_token_id=0,
                )  # fmt: skip

        return call

    return _two_lengths(generate(1), generate(args.new_tokens), args.new_tokens)


def keras_hub_generate(args: argparse.Namespace) -> Timed:
    backend = {"tensorflow": "tensorflow", "keras-jax": "jax", "keras-torch": "torch"}
    os.environ["KERAS_BACKEND"] = backend[args.framework]
    if args.framework == "tensorflow":
        import tensorflow as tf

        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    elif args.framework == "keras-torch":
        import torch

        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(args.threads)
    from fwbench.frameworks import generation
    from fwbench.models import keras_hub_lm
    from fwbench.models.sources import hf

    if _library(args.model):
        lm = hf.build_keras(args.model.removeprefix("hf:")).lm
    else:  # the zoo's GPT-2, with the weights every framework loads
        case = _case(args)
        model = keras_hub_lm.build(
            args.model, seq_len=args.seq_len, vocab_size=case.dim("vocab_size")
        )
        keras_hub_lm.load_gpt2_weights(model, generation.weights(case))
        lm = model.lm
    lm.compile(sampler="greedy")
    prompt = generation.prompt(_case(args))
    batch, n = prompt.shape[0], args.new_tokens
    # keras-hub's input: the prompt padded to the generation's length; the mask marks
    # the prompt, and generate() fills every position past it.
    ids = np.concatenate([prompt, np.zeros((batch, n), np.int32)], axis=1)

    def generate(new: int) -> Callable[[], Any]:
        mask = np.zeros(ids.shape, bool)
        mask[:, : ids.shape[1] - new] = True
        inputs = {"token_ids": ids, "padding_mask": mask}
        return lambda: lm.generate(inputs, stop_token_ids=None)

    return _two_lengths(generate(1), generate(n), n)


def torch_loop(args: argparse.Namespace) -> Timed:
    import torch

    from fwbench.frameworks import generation
    from fwbench.models import torch_gpt

    torch.set_num_threads(args.threads)
    torch.set_num_interop_threads(args.threads)
    case = _case(args)
    model = torch_gpt.GPT2(args.model, args.seq_len, case.dim("vocab_size"))
    torch_gpt.load_weights(model, generation.weights(case))
    gpt = model.gpt.eval()
    ids = torch.from_numpy(generation.prompt(case)).long()
    # transformers 5 calls the cache `cache`; transformers 4 `past_key_values`.
    name = "cache" if "cache" in inspect.signature(gpt.forward).parameters else "past_key_values"

    def generate() -> list[float]:
        times = []
        with torch.inference_mode():
            start = time.perf_counter()
            out = gpt(input_ids=ids, use_cache=True, logits_to_keep=1)
            token = out.logits[:, -1].argmax(-1)
            token.cpu().numpy()
            times.append(time.perf_counter() - start)
            for _ in range(args.new_tokens - 1):
                start = time.perf_counter()
                out = gpt(input_ids=token[:, None], use_cache=True, logits_to_keep=1,
                          **{name: out[name]})  # fmt: skip
                token = out.logits[:, -1].argmax(-1)
                token.cpu().numpy()
                times.append(time.perf_counter() - start)
        return times

    return _per_token(generate)


def flax_loop(args: argparse.Namespace) -> Timed:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from fwbench.frameworks import generation
    from fwbench.models import flax_gpt
    from fwbench.models.sources import hf

    # As fwbench's worker sets it (fp32 is fp32 on every device).
    jax.config.update("jax_default_matmul_precision", "highest")  # type: ignore[no-untyped-call]
    case = _case(args)
    if _library(args.model):
        model = hf.build_flax(args.model.removeprefix("hf:"))
    else:  # the zoo's GPT-2, with the weights every framework loads
        model = flax_gpt.gpt2(args.model, args.seq_len, case.dim("vocab_size"))
        flax_gpt.load_weights(model, generation.weights(case))
    model.eval()  # type: ignore[no-untyped-call]
    graphdef, state = nnx.split(model)

    def forward(state: Any, ids: Any, cache: Any, start: Any) -> Any:
        ids = ids if ids.ndim == 2 else ids[:, None]
        logits, cache = nnx.merge(graphdef, state).forward(ids, start, cache, last_only=True)
        return jnp.argmax(logits[:, -1], axis=-1), cache

    step = jax.jit(forward, donate_argnums=2)
    prompt = jnp.asarray(generation.prompt(case))
    batch, length = prompt.shape
    context = length + args.new_tokens

    def generate() -> list[float]:
        cache = model.empty_cache(batch, context, jnp.float32)
        times = []
        start = time.perf_counter()
        token, cache = step(state, prompt, cache, 0)
        np.asarray(token)
        times.append(time.perf_counter() - start)
        for position in range(length, context - 1):
            start = time.perf_counter()
            token, cache = step(state, token, cache, position)
            np.asarray(token)
            times.append(time.perf_counter() - start)
        return times

    return _per_token(generate)


LIBRARIES: dict[str, Callable[[argparse.Namespace], Timed]] = {
    "torch": transformers_generate, "tensorflow": keras_hub_generate,
    "keras-jax": keras_hub_generate, "keras-torch": keras_hub_generate,
}  # fmt: skip


def _way(args: argparse.Namespace, framework: str) -> tuple[Callable[..., Timed], float]:
    """How `framework`'s users generate `args.model` (see the docstring), and the target."""
    if framework == "torch" and not _library(args.model):
        return torch_loop, TARGET
    if framework == "flax":
        return flax_loop, TARGET
    return LIBRARIES[framework], LIBRARY_TARGET


def hand(args: argparse.Namespace) -> dict[str, float]:
    """The hand-timed generation in this process: warm up, then generations for `seconds`."""
    _threads(args, args.framework)
    generate = _way(args, args.framework)[0](args)
    for _ in range(3):
        generate()
    tpot: list[float] = []
    ttft: list[float] = []
    end = time.perf_counter() + args.seconds
    while time.perf_counter() < end or len(tpot) < 6:
        first, per_token = generate()
        ttft.append(first)
        tpot.append(per_token)
    return {"tpot_s": statistics.median(tpot), "ttft_s": statistics.median(ttft),
            "generations": len(tpot)}  # fmt: skip


def _has_settings(framework: str, options: str | None) -> bool:
    """Whether `framework` has every setting `options` names (decoding: the Keras
    backends; state: Flax): fwbench's --options go to those frameworks only."""
    from fwbench.case import option_values_of
    from fwbench.catalog.frameworks import FRAMEWORKS

    given = option_values_of(options)
    return bool(given) and set(given) <= {s.name for s in FRAMEWORKS[framework].settings}


def _fwbench(args: argparse.Namespace, framework: str, db: Path) -> dict[str, float]:
    argv = [FWBENCH, "run", "--framework", framework, "--model", args.model,
            "--task", "generate", "--batch-size", str(args.batch_size),
            *(["--input-shape", _length(args)["inputs"]] if _library(args.model)
              else ["--seq-len", str(args.seq_len)]),
            "--task-dims", f"new_tokens={args.new_tokens}",
            "--threads", str(args.threads), "--min-runs", "1", "--max-runs", "1",
            *(["--options", args.options] if _has_settings(framework, args.options) else []),
            "--db", str(db), "--json"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"fwbench run {framework}: {proc.stderr[-2000:]}")
    record = json.loads(proc.stdout)  # one case: its record
    if record["status"] != "ok":
        raise RuntimeError(f"fwbench run {framework}: {record['error']}")
    figures = record["figures"]
    return {"tpot_s": figures["tpot_s"]["median"], "ttft_s": figures["ttft_s"]["median"]}


def _hand(args: argparse.Namespace, framework: str) -> dict[str, float]:
    argv = [sys.executable, __file__, "--hand", "--framework", framework,
            "--model", args.model, "--batch-size", str(args.batch_size),
            "--seq-len", str(args.seq_len), "--new-tokens", str(args.new_tokens),
            "--threads", str(args.threads), "--seconds", str(args.seconds)]  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"hand loop {framework}: {proc.stderr[-2000:]}")
    found: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--framework", action="append", choices=FRAMEWORKS)
    p.add_argument("--model", default="gpt2")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument(
        "--options",
        help="fwbench's --options, for the frameworks that have those settings (e.g. "
        "decoding=loop, to set the Keras backends' compiled decoding loop against "
        "keras-hub's generate(); state=arrays for Flax)",
    )
    p.add_argument("--hand", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.hand:
        args.framework = args.framework[0]
        print(json.dumps(hand(args)))
        return
    frameworks = args.framework or list(FRAMEWORKS)
    loops = [f for f in frameworks if _way(args, f)[0] in (torch_loop, flax_loop)]
    libraries = [f for f in frameworks if f not in loops]
    against = " and ".join(
        [*(["the libraries' generate()"] if libraries else []),
         *([f"a hand loop ({', '.join(loops)})"] if loops else [])]
    )  # fmt: skip
    print(
        f"# {date.today()}: {args.model} generate against {against}"
        f"{', fwbench with ' + args.options if args.options else ''}, "
        f"b{args.batch_size} prompt {args.seq_len} "
        f"new {args.new_tokens}, {args.threads} threads, {args.rounds} rounds (ABBA)"
    )

    with tempfile.TemporaryDirectory() as tmp:
        for framework in frameworks:
            ours: list[float] = []
            theirs: list[float] = []
            firsts: list[tuple[float, float]] = []
            for i in range(args.rounds):
                order = ("fwbench", "hand") if i % 2 == 0 else ("hand", "fwbench")
                got: dict[str, dict[str, float]] = {}
                for side in order:
                    db = Path(tmp) / f"{framework}-{i}.duckdb"
                    got[side] = (
                        _fwbench(args, framework, db)
                        if side == "fwbench"
                        else _hand(args, framework)
                    )
                ours.append(got["fwbench"]["tpot_s"])
                theirs.append(got["hand"]["tpot_s"])
                firsts.append((got["fwbench"]["ttft_s"], got["hand"]["ttft_s"]))
                print(
                    f"{framework} round {i + 1}: TPOT fwbench {ours[-1] * 1e3:.2f} ms, hand "
                    f"{theirs[-1] * 1e3:.2f} ms ({ours[-1] / theirs[-1]:.3f}); TTFT "
                    f"{firsts[-1][0] * 1e3:.1f} / {firsts[-1][1] * 1e3:.1f} ms",
                    flush=True,
                )
            found = ratio(ours, theirs)
            target = _way(args, framework)[1]
            reading = {
                "yes": f"within 1.00 +- {target:.2f}",
                "?": f"across an edge of 1.00 +- {target:.2f}: more rounds to decide",
                "NO": f"OUTSIDE 1.00 +- {target:.2f}",
            }[against_target(found.ci_low, found.ci_high, target)]
            print(
                f"{framework}: TPOT fwbench / hand {found.value:.3f} "
                f"(95% CI {found.ci_low:.3f}-{found.ci_high:.3f}) over {args.rounds} rounds: "
                f"{reading}",
                flush=True,
            )


if __name__ == "__main__":
    main()
