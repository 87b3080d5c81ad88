"""Inference loops written the way each framework's own documentation writes them: the
reference that fwbench's figures are checked against (handloop_crosscheck.py).

Only the model comes from fwbench (its builders, so both sides run the same network);
the loop, the compilation and the synchronisation are the framework's documented ones:
PyTorch `torch.inference_mode()`, TensorFlow a `tf.function`, Keras on JAX a `jax.jit`
of the model's `stateless_call`, Flax NNX a `jax.jit` over `nnx.merge` of a state split
once, ONNX Runtime an `InferenceSession` on the exporter's
default export, OpenVINO `ov.convert_model` then `compile_model` with the LATENCY hint,
LiteRT: Keras 3's `model.export(format="litert")` then LiteRT's `Interpreter` with
`set_tensor`, `invoke` and `get_tensor`.

Run one in a fresh process: `python handloops.py torch --model resnet50 --batch-size 8
--input-size 224 --threads 2 --seconds 5`; it prints one JSON line, the median seconds
per step over steps timed one by one (each synchronised) after a warmup.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

WARMUP_S = 3.0
WARMUP_STEPS = 3


def _dims(args: argparse.Namespace) -> dict[str, int]:
    return {"input_size": args.input_size, "num_classes": 1000}


def torch_loop(args: argparse.Namespace) -> Callable[[], Any]:
    import torch

    from fwbench.catalog.models import get_model

    torch.set_num_threads(args.threads)
    model = get_model(args.model).build("torch", _dims(args)).eval()
    x = torch.randn(args.batch_size, 3, args.input_size, args.input_size)

    def step() -> Any:
        with torch.inference_mode():
            return model(x)

    return step


def tensorflow_loop(args: argparse.Namespace) -> Callable[[], Any]:
    import tensorflow as tf

    from fwbench.catalog.models import get_model

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    model = get_model(args.model).build("tensorflow", _dims(args))
    x = tf.random.normal((args.batch_size, args.input_size, args.input_size, 3))

    @tf.function
    def infer(batch: Any) -> Any:
        return model(batch, training=False)

    return lambda: infer(x).numpy()


def keras_jax_loop(args: argparse.Namespace) -> Callable[[], Any]:
    os.environ["KERAS_BACKEND"] = "jax"
    import jax
    import numpy as np

    from fwbench.catalog.models import get_model

    model = get_model(args.model).build("keras-jax", _dims(args))
    trainable = [v.value for v in model.trainable_variables]
    frozen = [v.value for v in model.non_trainable_variables]
    x = jax.numpy.asarray(
        np.random.default_rng(0).standard_normal(
            (args.batch_size, args.input_size, args.input_size, 3), dtype=np.float32
        )
    )

    @jax.jit
    def infer(tv: Any, ntv: Any, batch: Any) -> Any:
        return model.stateless_call(tv, ntv, batch, training=False)[0]

    return lambda: infer(trainable, frozen, x).block_until_ready()


def flax_loop(args: argparse.Namespace) -> Callable[[], Any]:
    import jax
    import numpy as np
    from flax import nnx

    from fwbench.catalog.models import get_model

    model = get_model(args.model).build("flax", _dims(args))
    model.eval()
    # Flax's performance guide's fast path: split once, jax.jit over merge.
    graphdef, state = nnx.split(model)
    x = jax.numpy.asarray(
        np.random.default_rng(0).standard_normal(
            (args.batch_size, args.input_size, args.input_size, 3), dtype=np.float32
        )
    )

    @jax.jit
    def infer(state: Any, batch: Any) -> Any:
        return nnx.merge(graphdef, state)(batch)

    return lambda: infer(state, x).block_until_ready()


def _torch_model_and_input(args: argparse.Namespace) -> tuple[Any, Any]:
    import torch

    from fwbench.catalog.models import get_model

    torch.set_num_threads(args.threads)
    model = get_model(args.model).build("torch", _dims(args)).eval()
    return model, torch.randn(args.batch_size, 3, args.input_size, args.input_size)


def onnxruntime_loop(args: argparse.Namespace) -> Callable[[], Any]:
    import tempfile

    import onnxruntime as ort
    import torch

    model, x = _torch_model_and_input(args)
    path = os.path.join(tempfile.mkdtemp(), "model.onnx")
    # The exporter's defaults; its progress lines go to stderr, stdout carries the figure.
    with torch.no_grad(), contextlib.redirect_stdout(sys.stderr):
        torch.onnx.export(model, (x,), path, dynamo=True)
    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x.numpy()}
    return lambda: session.run(None, feed)


def openvino_loop(args: argparse.Namespace) -> Callable[[], Any]:
    import openvino as ov

    model, x = _torch_model_and_input(args)
    converted = ov.convert_model(model, example_input=x)
    # f32 as fwbench's fp32 case: left out, the CPU plugin runs bf16 on CPUs that have it.
    config = {
        "PERFORMANCE_HINT": "LATENCY",
        "INFERENCE_NUM_THREADS": args.threads,
        "INFERENCE_PRECISION_HINT": "f32",
    }
    compiled = ov.Core().compile_model(converted, "CPU", config)
    request = compiled.create_infer_request()
    batch = x.numpy()
    return lambda: request.infer({0: batch})


def litert_loop(args: argparse.Namespace) -> Callable[[], Any]:
    import tempfile

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    from fwbench.catalog.models import get_model

    model = get_model(args.model).build("tensorflow", _dims(args))
    path = os.path.join(tempfile.mkdtemp(), "model.tflite")
    # Keras 3's own export to LiteRT; its progress lines go to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        model.export(path, format="litert")
    interpreter = Interpreter(model_path=path, num_threads=args.threads)
    (given,) = interpreter.get_input_details()
    (output,) = interpreter.get_output_details()
    shape = (args.batch_size, args.input_size, args.input_size, 3)
    # The export leaves the batch open: the application sizes it once, then allocates.
    interpreter.resize_tensor_input(given["index"], shape)
    interpreter.allocate_tensors()
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)

    def step() -> Any:
        interpreter.set_tensor(given["index"], x)
        interpreter.invoke()
        return interpreter.get_tensor(output["index"])

    return step


LOOPS: dict[str, Callable[[argparse.Namespace], Callable[[], Any]]] = {
    "torch": torch_loop,
    "tensorflow": tensorflow_loop,
    "keras-jax": keras_jax_loop,
    "flax": flax_loop,
    "onnxruntime": onnxruntime_loop,
    "openvino": openvino_loop,
    "litert": litert_loop,
}


def measure(step: Callable[[], Any], seconds: float) -> dict[str, Any]:
    start = time.perf_counter()
    warm = 0
    while warm < WARMUP_STEPS or time.perf_counter() - start < WARMUP_S:
        step()
        warm += 1
    times: list[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    cpu = os.times()
    return {
        "median_s": statistics.median(times),
        "steps": len(times),
        "warmup_steps": warm,
        "cpu_s": cpu.user + cpu.system,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=sorted(LOOPS))
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--input-size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    step = LOOPS[args.framework](args)
    sys.stdout.write(json.dumps(measure(step, args.seconds)) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
