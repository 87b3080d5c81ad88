"""Harness overhead: fwbench's step time vs a plain hand-written loop, interleaved.

For each framework, alternates R rounds of (a) a hand-written training loop, written the
way a user would write it (same model, optimizer, data, threads; a sync after every
step; median of per-step times), each in a fresh process, and (b) `fwbench run` on the
same case. Prints the medians and the ratio fwbench / hand-written. Target: within 3%.

    .venv/bin/python benchmarks/harness_overhead.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from fwbench.launch.process import worker_env

HAND_WRITTEN = {
    "torch": """
import statistics, sys, time, torch, torchvision
b, s, threads, steps = map(int, sys.argv[1:5])
torch.set_num_threads(threads); torch.set_num_interop_threads(threads)
model = torchvision.models.resnet18(weights=None, num_classes=1000).train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x, y = torch.randn(b, 3, s, s), torch.randint(0, 1000, (b,))
def step():
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
times = []
for i in range(steps):
    t = time.perf_counter(); step(); times.append(time.perf_counter() - t)
print(statistics.median(times[len(times) // 3:]))
""",
    "tensorflow": """
import os, statistics, sys, time
import tensorflow as tf, keras
b, s, threads, steps = map(int, sys.argv[1:5])
tf.config.threading.set_intra_op_parallelism_threads(threads)
tf.config.threading.set_inter_op_parallelism_threads(threads)
from fwbench.models.keras_resnet import resnet
model = resnet(18, num_classes=1000, input_size=s)
opt = keras.optimizers.SGD(learning_rate=0.01, momentum=0.9); opt.build(model.trainable_variables)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
x = tf.random.normal((b, s, s, 3)); y = tf.random.uniform((b,), maxval=1000, dtype=tf.int32)
@tf.function
def step(x, y):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss
times = []
for i in range(steps):
    t = time.perf_counter(); step(x, y).numpy(); times.append(time.perf_counter() - t)
print(statistics.median(times[len(times) // 3:]))
""",
}
MODES = {"torch": "eager", "tensorflow": "graph"}


def hand_written(framework: str, batch: int, size: int, threads: int, steps: int) -> float:
    out = subprocess.run(
        [sys.executable, "-c", HAND_WRITTEN[framework], *map(str, (batch, size, threads, steps))],
        capture_output=True,
        text=True,
        check=True,
        env=worker_env(threads, "cpu"),
    )
    return float(out.stdout.strip().splitlines()[-1])


def with_fwbench(framework: str, batch: int, size: int, threads: int, db: Path) -> float:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fwbench",
            "run",
            "--framework",
            framework,
            "--model",
            "resnet18",
            "--task",
            "train",
            "--mode",
            MODES[framework],
            "--batch-size",
            str(batch),
            "--input-size",
            str(size),
            "--threads",
            str(threads),
            "--max-time",
            "3",
            "--db",
            str(db),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(json.loads(out.stdout)["step_time_s"]["median"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--input-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=60, help="hand-written loop steps per round")
    p.add_argument("--frameworks", default="torch,tensorflow")
    a = p.parse_args()
    print(
        f"resnet18 train, batch {a.batch_size}, {a.input_size}px, {a.threads} threads, "
        f"{a.rounds} interleaved rounds"
    )
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "overhead.duckdb"
        for fw in a.frameworks.split(","):
            hand, tool = [], []
            for r in range(a.rounds):
                hand.append(hand_written(fw, a.batch_size, a.input_size, a.threads, a.steps))
                tool.append(with_fwbench(fw, a.batch_size, a.input_size, a.threads, db))
                print(
                    f"  {fw} round {r + 1}: hand {hand[-1] * 1e3:.2f} ms, "
                    f"fwbench {tool[-1] * 1e3:.2f} ms",
                    flush=True,
                )
            h, t = statistics.median(hand), statistics.median(tool)
            print(
                f"{fw}/{MODES[fw]}: hand-written median {h * 1e3:.2f} ms, fwbench median "
                f"{t * 1e3:.2f} ms, ratio fwbench/hand = {t / h:.3f} ({(t / h - 1):+.1%})"
            )


if __name__ == "__main__":
    main()
