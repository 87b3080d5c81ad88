"""A user's own model, from each source fwbench reads (issue "your model"): built in the
test (nothing downloaded), run in every framework its source allows, its outputs checked
across them on the same inputs, its identity the content hash of its file, and every bad
input one line, exit 2, nothing written. The test process imports no framework: model
files are made by a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import fwbench
from tests.unit.test_robustness import cli

FAST = ["--min-runs", "1", "--max-runs", "1", "--max-time", "0.3", "--threads", "1", "--no-flops"]


def make(script: str, folder: Path) -> None:
    """Run `script` in a fresh Python process in `folder` (it may import a framework)."""
    subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=folder, check=True, timeout=600
    )


def run(*args: str, db: Path, cwd: Path) -> list[dict[str, Any]]:
    """`fwbench run ... --json` in `cwd`: its records (one or several)."""
    proc = subprocess.run(
        [sys.executable, "-m", "fwbench", "run", *args, *FAST, "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout)
    return found if isinstance(found, list) else [found]


def agreed(records: list[dict[str, Any]]) -> None:
    """Every record ok, the same parameters, the outputs checked equal across them."""
    assert all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    assert len({r["param_count"] for r in records}) == 1, [r["param_count"] for r in records]
    for r in records:
        check = r["settings"].get("output_agreement", "")
        assert check.startswith("passed"), check
        assert not r["different_work"]


NETS = """
def build():
    import torch

    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
"""


def test_a_pytorch_function_runs_on_pytorch_and_the_runtimes_alike(tmp_path: Path) -> None:
    (tmp_path / "nets.py").write_text(NETS)
    records = run(
        "--framework", "torch", "--framework", "onnxruntime", "--framework", "openvino",
        "--model", "torch:nets.py:build", "--task", "infer", "--input-shape", "Bx16",
        "--batch-size", "4", db=tmp_path / "r.duckdb", cwd=tmp_path,
    )  # fmt: skip
    agreed(records)
    first = records[0]
    assert first["model"].startswith("nets.build@") and first["param_count"] == 676
    assert first["model_path"] == f"torch:{tmp_path / 'nets.py'}:build"
    assert first["inputs"] == "input=Bx16:float32" and first["batch_size"] == 4
    # Trained with the synthetic loss, labelled as such.
    (trained,) = run(
        "--framework", "torch", "--model", "torch:nets.py:build", "--task", "train",
        "--input-shape", "Bx16", db=tmp_path / "t.duckdb", cwd=tmp_path,
    )  # fmt: skip
    assert trained["status"] == "ok", trained["error"]
    assert trained["settings"]["loss"].startswith("synthetic: the mean of the model's")


EXPORTS = """
import torch

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        return self.head(self.conv(x).mean((2, 3)))

torch.manual_seed(0)
net = Net().eval()
x = torch.randn(2, 3, 16, 16)
batch = torch.export.Dim("batch", min=1, max=1024)
torch.export.save(torch.export.export(net, (x,), dynamic_shapes={"x": {0: batch}}), "net.pt2")
torch.onnx.export(net, (x,), "net.onnx", dynamo=True, dynamic_shapes={"x": {0: batch}},
                  input_names=["x"])
torch.onnx.export(net, (torch.randn(1, 3, 16, 16),), "fixed.onnx", dynamo=True)
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("exported")
    make(EXPORTS, folder)
    return folder


def test_an_exported_program_and_an_onnx_file_run_where_they_can(exported: Path) -> None:
    db = exported / "r.duckdb"
    program = run(
        "--framework", "torch", "--framework", "onnxruntime", "--model", "net.pt2",
        "--task", "infer", "--batch-size", "3", db=db, cwd=exported,
    )  # fmt: skip
    agreed(program)
    assert program[0]["inputs"] == "x=Bx3x16x16:float32"  # read from the program
    graph = run(
        "--framework", "onnxruntime", "--framework", "openvino", "--model", "net.onnx",
        "--task", "infer", "--batch-size", "3", db=db, cwd=exported,
    )  # fmt: skip
    agreed(graph)
    assert graph[0]["inputs"] == "x=Bx3x16x16:float32"
    # The same network, exported: the same parameters as PyTorch counts them.
    assert graph[0]["param_count"] == program[0]["param_count"] == 8 * 3 * 9 + 8 + 8 * 5 + 5
    # A graph exported with a static batch takes that batch, and says so otherwise.
    (fixed,) = run(
        "--framework", "onnxruntime", "--model", "fixed.onnx", "--task", "infer",
        db=db, cwd=exported,
    )  # fmt: skip
    assert fixed["status"] == "ok" and fixed["batch_size"] == 1


def test_library_architectures_build_with_random_weights(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    timm_records = run(
        "--framework", "torch", "--framework", "onnxruntime", "--model", "timm:test_resnet",
        "--task", "infer", "--input-shape", "Bx3x32x32", "--batch-size", "2",
        db=db, cwd=tmp_path,
    )  # fmt: skip
    agreed(timm_records)  # the same weights in both workers: a fixed seed
    # A transformers model folder (its config only), decoder-only: it generates.
    folder = tmp_path / "tiny-gpt"
    folder.mkdir()
    config = {
        "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_layer": 1,
        "n_embd": 32, "n_head": 2, "n_positions": 64, "vocab_size": 100,
    }  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    (generated,) = run(
        "--framework", "torch", "--model", f"hf:{folder}", "--task", "generate",
        "--input-shape", "input_ids=Bx8", "--task-dims", "new_tokens=4", "--batch-size", "1",
        db=db, cwd=tmp_path,
    )  # fmt: skip
    assert generated["status"] == "ok", generated["error"]
    assert generated["inputs"] == "input_ids=Bx8:int64<100"
    assert len(generated["settings"]["generated_tokens"]) == 4
    assert generated["figures"]["tpot_s"]["median"] > 0
    (trained,) = run(
        "--framework", "torch", "--model", f"hf:{folder}", "--task", "train",
        "--input-shape", "input_ids=Bx8", "--batch-size", "2", db=db, cwd=tmp_path,
    )  # fmt: skip
    assert trained["status"] == "ok", trained["error"]
    assert trained["settings"]["loss"].startswith("cross-entropy on logits at every position")


TWINS = """
from fwbench.catalog.models import ModelSpec


def _torch(num_classes, input_size, hidden=16):
    from torch import nn

    return nn.Sequential(
        nn.Flatten(), nn.Linear(3 * input_size * input_size, hidden), nn.ReLU(),
        nn.Linear(hidden, num_classes),
    )


def _keras(num_classes, input_size, hidden=16):
    import keras

    return keras.Sequential([
        keras.Input((input_size, input_size, 3)), keras.layers.Flatten(),
        keras.layers.Dense(hidden, activation="relu"), keras.layers.Dense(num_classes),
    ])


mlp = ModelSpec(
    name="mlp", family="mine", input_kind="image", default_input_size=8,
    builders={"torch": _torch, "tensorflow": _keras},
)
lopsided = ModelSpec(
    name="lopsided", family="mine", input_kind="image", default_input_size=8,
    builders={"torch": _torch, "tensorflow": lambda **dims: _keras(**dims, hidden=24)},
)
"""


def test_twins_run_like_the_zoo_and_a_different_twin_is_flagged(tmp_path: Path) -> None:
    (tmp_path / "twins.py").write_text(TWINS)
    db = tmp_path / "r.duckdb"
    base = ["--framework", "torch", "--framework", "tensorflow", "--task", "infer"]
    same = run(*base, "--model", "twins.py:mlp", "--num-classes", "4", db=db, cwd=tmp_path)
    assert all(r["status"] == "ok" for r in same), [r["error"] for r in same]
    assert {r["param_count"] for r in same} == {3 * 64 * 16 + 16 + 16 * 4 + 4}
    assert not any(r["different_work"] for r in same)
    assert same[0]["model"].startswith("mlp@") and same[0]["dims"]["input_size"] == 8
    different = run(
        *base, "--model", "twins.py:lopsided", "--num-classes", "4", db=db, cwd=tmp_path
    )
    assert all(r["different_work"] for r in different)
    assert any("DIFFERENT WORK" in w or "differ" in w for r in different for w in r["warnings"])


KERAS = """
import keras

keras.utils.set_random_seed(0)
image = keras.Input((8, 8, 3), name="image")
extra = keras.Input((4,), name="extra")
h = keras.layers.Conv2D(6, 3, activation="relu")(image)
h = keras.layers.BatchNormalization()(h)
h = keras.layers.GlobalAveragePooling2D()(h)
h = keras.layers.Concatenate()([h, keras.layers.Dense(6)(extra)])
net = keras.Model([image, extra], keras.layers.Dense(5)(h))
net.save("net.keras")
net.export("served", format="tf_saved_model", verbose=False)
"""
# Conv 3x3x3x6 + 6, BatchNormalization's scale and shift 2 x 6, Dense 4x6 + 6, Dense 12x5 + 5.
KERAS_PARAMS = 3 * 3 * 3 * 6 + 6 + 2 * 6 + 4 * 6 + 6 + 12 * 5 + 5


@pytest.fixture(scope="module")
def keras_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("keras")
    make(KERAS, folder)
    return folder


def test_a_keras_file_runs_on_the_three_keras_backends_alike(keras_files: Path) -> None:
    db = keras_files / "r.duckdb"
    backends = ["--framework", "tensorflow", "--framework", "keras-jax",
                "--framework", "keras-torch"]  # fmt: skip
    # And on LiteRT, converted by TensorFlow's converter as the zoo's Keras models are.
    inferred = run(
        *backends, "--framework", "litert", "--model", "net.keras", "--task", "infer",
        "--batch-size", "3", db=db, cwd=keras_files,
    )  # fmt: skip
    agreed(inferred)
    first = inferred[0]
    assert first["model"].startswith("net.keras@") and first["param_count"] == KERAS_PARAMS
    # Read from the model: its two inputs, by name, the batch left open.
    assert first["inputs"] == "image=Bx8x8x3:float32;extra=Bx4:float32"
    assert first["settings"]["keras_dtype_policy"] == "float32"
    converted = next(r for r in inferred if r["framework"] == "litert")
    assert converted["settings"]["output_check"] == "agrees"  # against TensorFlow's
    trained = run(
        *backends, "--model", "net.keras", "--task", "train", "--batch-size", "3",
        db=db, cwd=keras_files,
    )  # fmt: skip
    assert all(r["status"] == "ok" for r in trained), [r["error"] for r in trained]
    assert {r["param_count"] for r in trained} == {KERAS_PARAMS}
    assert all(r["settings"]["loss"].startswith("synthetic: the mean") for r in trained)
    # A file keeps the dtype policy it was saved with: bf16 would be a label, not a run.
    (mixed,) = run(
        "--framework", "keras-jax", "--model", "net.keras", "--task", "infer",
        "--precision", "bf16", db=db, cwd=keras_files,
    )  # fmt: skip
    assert mixed["status"] == "error" and "computes with dtype policy float32" in mixed["error"]


KERAS_NETS = """
def build():
    import keras

    inputs = keras.Input((12,), name="features")
    hidden = keras.layers.Dense(24, activation="relu")(inputs)
    return keras.Model(inputs, keras.layers.Dense(3)(hidden))


def torchy():
    import torch

    return torch.nn.Linear(4, 2)
"""


def test_a_keras_function_runs_on_its_backends_and_the_runtimes_alike(tmp_path: Path) -> None:
    (tmp_path / "knets.py").write_text(KERAS_NETS)
    # Random weights from the function: the same on every backend, so the outputs agree;
    # the runtimes take it exported from Keras' PyTorch backend.
    records = run(
        "--framework", "tensorflow", "--framework", "keras-torch", "--framework", "onnxruntime",
        "--framework", "openvino", "--model", "keras:knets.py:build", "--task", "infer",
        "--batch-size", "2", db=tmp_path / "r.duckdb", cwd=tmp_path,
    )  # fmt: skip
    agreed(records)
    first = records[0]
    assert first["model"].startswith("knets.build@") and first["param_count"] == 12 * 24 + 24 + 75
    assert first["model_path"] == f"keras:{tmp_path / 'knets.py'}:build"
    assert first["inputs"] == "features=Bx12:float32"
    exported = next(r for r in records if r["framework"] == "onnxruntime")
    assert exported["settings"]["output_check"] == "agrees"  # against Keras on PyTorch
    (trained,) = run(
        "--framework", "tensorflow", "--model", "keras:knets.py:build", "--task", "train",
        "--objective", "classify", db=tmp_path / "t.duckdb", cwd=tmp_path,
    )  # fmt: skip
    assert trained["status"] == "ok", trained["error"]
    assert trained["settings"]["loss"] == "cross-entropy on logits"


def test_a_saved_model_runs_on_tensorflow_openvino_and_litert_alike(keras_files: Path) -> None:
    db = keras_files / "s.duckdb"
    records = run(
        "--framework", "tensorflow", "--framework", "openvino", "--framework", "litert",
        "--model", "served", "--task", "infer", "--batch-size", "3", db=db, cwd=keras_files,
    )  # fmt: skip
    agreed(records)
    converted = next(r for r in records if r["framework"] == "litert")
    assert converted["settings"]["converter"].startswith("tf.lite.TFLiteConverter.from_saved")
    xla = run(
        "--framework", "tensorflow", "--framework", "openvino", "--mode", "xla",
        "--mode", "latency", "--model", "served", "--task", "infer", "--batch-size", "3",
        db=db, cwd=keras_files,
    )  # fmt: skip
    agreed(xla)
    first = records[0]
    assert first["model"].startswith("served@") and first["param_count"] == KERAS_PARAMS
    # The serving signature's inputs, in the order of their names.
    assert first["inputs"] == "extra=Bx4:float32;image=Bx8x8x3:float32"
    proc = fwbench("models", "--model", str(keras_files / "served"), "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["source"] == "saved_model" and row["params"] == KERAS_PARAMS
    assert row["frameworks"]["openvino"]["runs"]
    assert "tf2onnx" in row["frameworks"]["onnxruntime"]["how"]


def test_two_files_of_one_name_are_two_models(tmp_path: Path) -> None:
    from fwbench.catalog.models import get_model

    for folder, width in (("a", 16), ("b", 17)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "nets.py").write_text(NETS.replace("32", str(width)))
    first = get_model(f"torch:{tmp_path / 'a' / 'nets.py'}:build")
    second = get_model(f"torch:{tmp_path / 'b' / 'nets.py'}:build")
    assert first.name != second.name and first.workload != second.workload
    assert first.name.split("@")[0] == second.name.split("@")[0] == "nets.build"


# --- bad input: one line, exit 2, nothing written ---------------------------------------


def refused(argv: list[str], says: str, cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = cwd / "never.duckdb"
    old = Path.cwd()
    os.chdir(cwd)
    try:
        code, out, err = cli([*argv, "--db", str(db)], capsys)
    finally:
        os.chdir(old)
    assert code == 2, err
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert says in err, err
    assert not db.exists()


@pytest.mark.parametrize(
    ("model", "extra", "says"),
    [
        ("missing.onnx", [], "missing.onnx: no such file"),
        ("text.onnx", [], "not an ONNX model"),
        ("cut.onnx", [], "not an ONNX model"),
        ("broken.pt2", [], "not a saved torch.export program"),
        ("torch:nets.py:build", [], "does not declare its inputs; give them with --input-shape"),
        ("torch:nets.py:raises", ["--input-shape", "Bx16"], "RuntimeError: no weights here"),
        ("torch:nets.py:number", ["--input-shape", "Bx16"], "returned a int, not a torch.nn"),
        ("torch:nets.py:absent", ["--input-shape", "Bx16"], "has no function 'absent'"),
        ("torch:nowhere_at_all:build", [], "no module 'nowhere_at_all' on the Python path"),
        ("timm:no_such_net", [], "timm has no architecture 'no_such_net'"),
        ("hf:no_such_arch", [], "no built-in configuration for 'no_such_arch'"),
        ("module:function", [], "or a model of your own: torch:module:function"),
        ("torch:nets.py:build", ["--input-shape", "Bx16", "--objective", "fly"], "--objective"),
    ],
)
def test_a_bad_model_is_one_line(
    model: str,
    extra: list[str],
    says: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "nets.py").write_text(
        NETS
        + "\ndef raises():\n    raise RuntimeError('no weights here')\n"
        + "\ndef number():\n    return 3\n"
    )
    (tmp_path / "text.onnx").write_text("this is not a model\n")
    (tmp_path / "cut.onnx").write_bytes(b"\x08\x07\x12\x04abc")
    (tmp_path / "broken.pt2").write_bytes(b"PK\x03\x04 not a zip")
    argv = ["run", "--framework", "torch", "--model", model, "--task", "infer", *extra]
    if model.endswith(".onnx"):
        argv[2] = "onnxruntime"
    refused(argv, says, tmp_path, capsys)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--model", "bad.keras"], "not a Keras model file (a .keras file is the zip archive"),
        (["--model", "folder"], "not a TensorFlow SavedModel (the folder has no saved_model.pb)"),
        (["--model", "./gone/"], "gone/: no such file or folder"),
        (["--model", "keras:knets.py:torchy"], "torchy() returned a torch.nn.modules.linear."),
        (["--model", "served", "--task", "train"], "cannot train: a SavedModel's signature is"),
        (["--model", "served", "--mode", "eager"], "in mode eager: a SavedModel's signature"),
        (["--model", "served", "--framework", "keras-jax"], "Keras' other backends cannot run"),
        (["--model", "net.keras", "--framework", "torch"], "a Keras model runs on Keras 3's"),
    ],
)
def test_a_bad_keras_or_tensorflow_model_is_one_line(
    argv: list[str], says: str, keras_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (keras_files / "bad.keras").write_text("not a zip\n")
    (keras_files / "folder").mkdir(exist_ok=True)
    (keras_files / "knets.py").write_text(KERAS_NETS)
    framework = [] if "--framework" in argv else ["--framework", "tensorflow"]
    task = [] if "--task" in argv else ["--task", "infer"]
    refused(["run", *framework, *argv, *task], says, keras_files, capsys)


def test_a_framework_that_cannot_run_the_source_is_refused_with_why(
    exported: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--framework", "torch", "--model", "net.onnx", "--task", "infer"]
    refused(argv, "an ONNX file runs on the inference runtimes only", exported, capsys)
    argv = ["run", "--framework", "onnxruntime", "--model", "net.onnx", "--task", "train"]
    refused(argv, "cannot train", exported, capsys)
    argv = ["run", "--framework", "onnxruntime", "--model", "fixed.onnx", "--batch-size", "4",
            "--task", "infer"]  # fmt: skip
    refused(argv, "takes a batch of 1 only", exported, capsys)


def test_a_function_that_hangs_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from fwbench.launch import describe

    (tmp_path / "slow.py").write_text("def build():\n    import time\n    time.sleep(600)\n")
    monkeypatch.setattr(describe, "DESCRIBE_TIMEOUT_S", 3.0)
    argv = ["run", "--framework", "torch", "--model", "torch:slow.py:build", "--task", "infer",
            "--input-shape", "Bx4"]  # fmt: skip
    refused(argv, "did not finish in 3 s", tmp_path, capsys)


def test_models_says_where_a_model_runs(exported: Path) -> None:
    proc = fwbench("models", "--model", str(exported / "net.onnx"), "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["source"] == "onnx_file" and row["inputs"] == "x=Bx3x16x16:float32"
    assert row["frameworks"]["onnxruntime"]["runs"]
    assert not row["frameworks"]["torch"]["runs"]
    assert "inference runtimes only" in row["frameworks"]["torch"]["how"]
