"""A user's model from each kind of source, measured as a user would: one `fwbench run`
per model, its frameworks and modes interleaved, the default timing, verdicts with
intervals. Prints one line per variant (median step, parameters, the output check),
then fwbench's verdict table over every model measured.

    cd benchmarks && ../.venv/bin/python your_model.py [--only timm] [--batch-size 1]

The models: timm's ConvNeXt-Tiny with random weights (PyTorch eager and compiled, ONNX
Runtime and OpenVINO from its ONNX export), an ONNX file exported here from a small
PyTorch CNN (ONNX Runtime against OpenVINO), a Keras 3 file on its three backends
(TensorFlow, JAX, PyTorch), and that network exported as a TensorFlow SavedModel
(TensorFlow graph and XLA, OpenVINO, LiteRT). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ONNX_SCRIPT = """
import torch
torch.manual_seed(0)
net = torch.nn.Sequential(
    torch.nn.Conv2d(3, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
    torch.nn.Conv2d(32, 64, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1),
    torch.nn.Flatten(), torch.nn.Linear(64, 10),
).eval()
batch = torch.export.Dim("batch", min=1, max=1024)
torch.onnx.export(net, (torch.randn(2, 3, 64, 64),), "cnn.onnx", dynamo=True,
                  dynamic_shapes={"input": {0: batch}}, input_names=["x"])
"""

KERAS_SCRIPT = """
import keras
keras.utils.set_random_seed(0)
inputs = keras.Input((64, 64, 3), name="image")
x = keras.layers.Conv2D(32, 3, padding="same", activation="relu")(inputs)
x = keras.layers.MaxPooling2D()(x)
x = keras.layers.Conv2D(64, 3, padding="same", activation="relu")(x)
x = keras.layers.GlobalAveragePooling2D()(x)
outputs = keras.layers.Dense(10)(x)
keras.Model(inputs, outputs).save("cnn.keras")
"""

SAVED_MODEL_SCRIPT = KERAS_SCRIPT.replace(
    'keras.Model(inputs, outputs).save("cnn.keras")',
    'keras.Model(inputs, outputs).export("cnn_saved_model", verbose=False)',
)

CASES: dict[str, dict[str, Any]] = {
    "timm": {
        "model": "timm:convnext_tiny",
        "variants": [("torch", "eager"), ("torch", "compile"), ("onnxruntime", None),
                     ("openvino", None)],
        "args": ["--input-shape", "Bx3x160x160"],
    },
    "onnx": {
        "model": "cnn.onnx",
        "script": ONNX_SCRIPT,
        "variants": [("onnxruntime", None), ("openvino", None)],
        "args": [],
    },
    "keras": {
        "model": "cnn.keras",
        "script": KERAS_SCRIPT,
        "variants": [("tensorflow", None), ("keras-jax", None), ("keras-torch", None)],
        "args": [],
    },
    "saved_model": {
        "model": "cnn_saved_model",
        "script": SAVED_MODEL_SCRIPT,
        "variants": [("tensorflow", "graph"), ("tensorflow", "xla"), ("openvino", None),
                     ("litert", None)],
        "args": [],
    },
}  # fmt: skip


def measure(name: str, case: dict[str, Any], folder: Path, batch: int, db: Path) -> None:
    if "script" in case:
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(case["script"])], cwd=folder, check=True
        )
    argv = [sys.executable, "-m", "fwbench", "run", "--model", case["model"], "--task", "infer"]
    for framework, _ in case["variants"]:
        argv += ["--framework", framework]
    modes = [mode for _, mode in case["variants"]]
    if any(modes):
        # One mode each: the default mode where none is named.
        from fwbench.case import default_mode

        argv += [
            arg
            for (framework, mode) in case["variants"]
            for arg in ("--mode", mode or str(default_mode(framework)))
        ]
    argv += [*case["args"], "--batch-size", str(batch), "--db", str(db), "--json"]
    proc = subprocess.run(argv, cwd=folder, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"{name}: failed: {proc.stderr.strip().splitlines()[-1]}")
        return
    print(f"== {name}: {case['model']}, batch {batch}")
    for r in json.loads(proc.stdout):
        st = r["step_time_s"] or {}
        check = r["settings"].get("output_agreement", "-")
        ms = {k: st.get(k, 0) * 1e3 for k in ("median", "ci_low", "ci_high")}
        print(
            f"  {r['framework']}/{r['mode']}: {r['status']}, median {ms['median']:.2f} ms "
            f"({ms['ci_low']:.2f}-{ms['ci_high']:.2f}), params {r['param_count']}, "
            f"outputs {check.split(':')[0]}"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=sorted(CASES), action="append")
    p.add_argument("--batch-size", type=int, default=1)
    p.add_argument("--db", type=Path, help="Keep the results here (default: a temp file).")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        db = a.db or folder / "your_model.duckdb"
        for name in a.only or sorted(CASES):
            measure(name, CASES[name], folder, a.batch_size, db.resolve())
        # The verdicts as fwbench shows them: one row per model, its variants side by side.
        argv = [sys.executable, "-m", "fwbench", "results", "--db", str(db), "--summary"]
        subprocess.run(argv, check=False)


if __name__ == "__main__":
    main()
