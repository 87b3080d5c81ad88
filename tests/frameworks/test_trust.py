"""Files users hand fwbench are data (issue 52): describing or running a downloaded
`.pt2` never unpickles more than `weights_only=True` allows nor loads compiled code.
The archives are made by a subprocess (the test process imports no framework)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import fwbench
from tests.frameworks.test_your_model import make

# A tiny exported program, then copies of it that torch.export.load would let run code:
# each writes MARKER when it is unpickled with weights_only=False.
ARCHIVES = """
import io, json, re, sys, zipfile
import torch

MARKER = sys.argv[1]

class Hostile:
    def __reduce__(self):
        return (exec, (f"open({MARKER!r}, 'w').close()",))

torch.manual_seed(0)
net = torch.nn.Linear(4, 3)
torch.export.save(torch.export.export(net, (torch.randn(2, 4),)), "good.pt2")
hostile = io.BytesIO()
torch.save(Hostile(), hostile)
plain = io.BytesIO()
torch.save(torch.nn.Parameter(net.weight.detach().clone()), plain)

def copy(name, change):
    # A fresh reader each time: writing an entry moves its ZipInfo's offsets.
    source = zipfile.ZipFile("good.pt2")
    with zipfile.ZipFile(name, "w") as out:
        for info in source.infolist():
            data = change(info.filename, source.read(info.filename))
            if data is not None:
                out.writestr(info, data)
        extra = change("", b"")
        if extra:
            out.writestr(*extra)

def weights_config(data, path_name, use_pickle):
    config = json.loads(data)
    entry = config["config"]["weight"]
    entry.update(path_name=path_name, use_pickle=use_pickle)
    return json.dumps(config).encode()

def sample_inputs(name, data):
    return hostile.getvalue() if name.endswith("sample_inputs/model.pt") else data or None

def pickled_weight(payload):
    def change(name, data):
        if name.endswith("model_weights_config.json"):
            return weights_config(data, "pickled_0", True)
        if name == "":
            return ("good/data/weights/pickled_0", payload)
        return data
    return change

def compiled(name, data):
    return ("good/data/aotinductor/model/model.so", b"\\x7fELF") if name == "" else data

def opaque(name, data):
    if name.endswith("model_constants_config.json"):
        return json.dumps({"config": {"c": {"path_name": "opaque_obj_0"}}}).encode()
    if name == "":
        return ("good/data/constants/opaque_obj_0", hostile.getvalue())
    return data

copy("inputs.pt2", sample_inputs)
copy("weight.pt2", pickled_weight(hostile.getvalue()))
copy("plain.pt2", pickled_weight(plain.getvalue()))
copy("compiled.pt2", compiled)
copy("opaque.pt2", opaque)
# The opaque constant's config first, then the harmless one under the same name: Python's
# zipfile reads the last copy, torch's reader the first.
copy("twice.pt2", opaque)
good = zipfile.ZipFile("good.pt2")
harmless = next(n for n in good.namelist() if n.endswith("model_constants_config.json"))
with zipfile.ZipFile("twice.pt2", "a") as out:
    out.writestr(harmless, good.read(harmless))

# A dynamic batch: its sizes are sympy expressions in the archive's JSON, which torch
# reads with sympify (Python's eval), and its graph's targets are names torch resolves.
batch = torch.export.Dim("batch", min=2, max=64)
dynamic = torch.export.export(net, (torch.randn(3, 4),), dynamic_shapes={"input": {0: batch}})
torch.export.save(dynamic, "dynamic.pt2")

def edited(name, old, new):
    source = zipfile.ZipFile("dynamic.pt2")
    with zipfile.ZipFile(name, "w") as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename.endswith("models/model.json"):
                changed = re.sub(old, new, data, count=1)
                assert changed != data, old
                data = changed
            out.writestr(info, data)

edited("sized.pt2", rb"Symbol[(]'s[0-9]+', positive=True, integer=True[)]",
       lambda m: m[0] + f"+0*__import__('os').system('touch {MARKER}')".encode())
edited("target.pt2", rb'"torch[.]ops[.]aten[.]linear[.]default"', b'"torch.serialization.save"')
"""


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pt2")
    make(f"import sys; sys.argv[1:] = [{str(folder / 'MARKER')!r}]\n" + ARCHIVES, folder)
    assert not (folder / "MARKER").exists()
    return folder


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("inputs.pt2", "refused: it holds a pickle of more than tensors (exec)"),
        ("weight.pt2", "refused: it holds a pickle of more than tensors (exec)"),
        ("compiled.pt2", "refused: it holds a program compiled by AOTInductor (native code)"),
        ("opaque.pt2", "refused: constant opaque_obj_0 of program 'model' is a pickled object"),
        ("twice.pt2", "refused: entry good/data/constants/model_constants_config.json is in"),
        ("sized.pt2", "refused: a symbolic size in models/model.json is not an expression"),
        ("target.pt2", "refused: its graph calls 'torch.serialization.save', not an operator"),
    ],
)
def test_a_pt2_that_would_run_code_is_refused_and_runs_none(
    archives: Path, name: str, says: str
) -> None:
    """Issue 52, item 1: `fwbench models --model m.pt2` ran a crafted pickle in its
    sample inputs and printed a normal table."""
    marker = archives / "MARKER"
    for argv in (
        ["models", "--model", str(archives / name)],
        ["run", "--framework", "torch", "--model", str(archives / name), "--task", "infer",
         "--db", str(archives / "never.duckdb")],
    ):  # fmt: skip
        proc = fwbench(*argv)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("error: model: ") and proc.stderr.count("\n") == 1
        assert says in proc.stderr, proc.stderr
        assert "weights_only=False" not in proc.stderr  # torch's advice is not ours
        assert not marker.exists(), f"{name}: its pickle ran"
    assert not (archives / "never.duckdb").exists()


@pytest.mark.parametrize(
    ("expr", "read"),
    [
        ("Symbol('s77', positive=True, integer=True)", True),
        ("Add(Mul(Integer(4), Symbol('s21', positive=True, integer=True)), Integer(-1))", True),
        # torch's own functions of sizes, underscores and all (a float size: sym_sqrt)
        (
            "FloatTrueDiv(Float('1.0', precision=53), OpaqueUnaryFn_sqrt(ToFloat("
            "Symbol('s27', positive=True, integer=True))))",
            True,
        ),
        ("Max(Integer(3), oo)", True),
        ("Symbol('s77', integer=True)+0*__import__('os').system('x')", False),
        ("S('__import__(\"os\")')", False),  # S() evaluates a string
        ("Symbol('s', integer=True).__class__", False),
        ("Poly('x; import os')", False),
        ("Symbol(lambda: 0)", False),
    ],
)
def test_a_symbolic_size_reads_only_as_sympy_prints_one(expr: str, read: bool) -> None:
    from fwbench.models.sources.torch_export import _operator, _printed_expr

    assert _printed_expr(expr) is read
    assert _operator("torch.ops.aten.linear.default") and _operator("torch._sym_sqrt")
    assert _operator("_operator.floordiv") and _operator("torch.ops.higher_order.cond")
    for called in ("torch.serialization.save", "torch.ops.aten.from_file.default",
                   "_operator.methodcaller", "torch.hub.load", "#ext:op"):  # fmt: skip
        assert not _operator(called), called


def test_a_pt2_with_a_dynamic_batch_reads_and_takes_any_batch(archives: Path) -> None:
    """Its sizes are expressions as torch.export writes them: read, never refused."""
    proc = fwbench("models", "--model", str(archives / "dynamic.pt2"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)[0]["inputs"] == "input=Bx4:float32"


def test_a_pt2_with_plainly_pickled_tensors_still_reads(archives: Path) -> None:
    """A weight torch saved as a pickle of a tensor is what weights_only=True reads."""
    proc = fwbench("models", "--model", str(archives / "plain.pt2"), "--json")
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["params"] == 15 and row["inputs"] == "input=2x4:float32", row


def test_a_function_whose_module_exits_at_import_is_one_line(tmp_path: Path) -> None:
    """Issue 52, item 8: the reading process ended without a word; it is said."""
    (tmp_path / "nets.py").write_text("import sys\nsys.exit(0)\n\ndef build():\n    pass\n")
    proc = fwbench("models", "--model", f"torch:{tmp_path / 'nets.py'}:build")
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "its code ended the process (exit code 0) before it was read" in proc.stderr


# Keras functions whose networks differ by backend, or by step, or hold no parameters:
# the check across frameworks must see what differs (issue 52, items 4 and 5).
SAME_WORK_NETS = """
import keras


def reversed_tail():
    inputs = keras.Input((12,), name="x")
    logits = keras.layers.Dense(32)(inputs)
    if keras.backend.backend() == "torch":  # elements 16-31 reversed on one backend
        logits = keras.ops.concatenate(
            [logits[:, :16], keras.ops.flip(logits[:, 16:], axis=1)], axis=1
        )
    second = keras.layers.Dense(4, activation="relu")(inputs)
    return keras.Model(inputs, [logits, second])


class Noise(keras.layers.Layer):
    def __init__(self):
        super().__init__()
        self.seeds = keras.random.SeedGenerator(1)

    def call(self, x):
        return x + keras.random.normal(keras.ops.shape(x), seed=self.seeds)


def noise_added():
    inputs = keras.Input((12,), name="x")
    return keras.Model(inputs, Noise()(keras.layers.Dense(16)(inputs)))


def no_parameters():
    inputs = keras.Input((12,), name="x")
    return keras.Model(inputs, keras.ops.tanh(inputs))
"""


def _same_work(tmp_path: Path, function: str) -> list[dict[str, object]]:
    from tests.frameworks.test_your_model import run

    (tmp_path / "checked.py").write_text(SAME_WORK_NETS)
    return run(
        "--framework", "tensorflow", "--framework", "keras-torch", "--model",
        f"keras:checked.py:{function}", "--task", "infer", "--batch-size", "2",
        db=tmp_path / f"{function}.duckdb", cwd=tmp_path,
    )  # fmt: skip


def test_elements_reversed_on_one_backend_are_different_work_naming_the_element(
    tmp_path: Path,
) -> None:
    """The old check read the first output's first 16 values and its RMS: it passed this
    network 'within 0'."""
    records = _same_work(tmp_path, "reversed_tail")
    for r in records:
        check = str(r["settings"]["output_agreement"])  # type: ignore[index]
        assert check.startswith(
            "failed: keras-torch/eager, tensorflow/graph outputs differ: output 1 at ["
        )
        assert "beyond the tolerance" in check and r["different_work"], check


def test_a_network_that_adds_noise_is_random_not_different_work(tmp_path: Path) -> None:
    records = _same_work(tmp_path, "noise_added")
    for r in records:
        check = str(r["settings"]["output_agreement"])  # type: ignore[index]
        assert check.startswith("random: keras-torch/eager, tensorflow/graph computed"), check
        assert not r["different_work"]


def test_a_network_without_parameters_is_the_same_work(tmp_path: Path) -> None:
    records = _same_work(tmp_path, "no_parameters")
    assert [r["param_count"] for r in records] == [0, 0]
    for r in records:
        assert not r["different_work"], r["different_work_reason"]
        assert str(r["settings"]["output_agreement"]).startswith("passed")  # type: ignore[index]


def test_a_network_changed_through_its_helper_module_is_another_model(tmp_path: Path) -> None:
    """Issue 52, item 6: `import helper` inside the function failed, and a network whose
    helper changed kept its name, its case key and its cached parameter count."""
    (tmp_path / "net.py").write_text(
        "def build():\n"
        "    import torch\n"
        "    import helper\n\n"
        "    return torch.nn.Linear(helper.WIDTH, 3)\n"
    )
    seen = []
    for width in (4, 4000):
        (tmp_path / "helper.py").write_text(f"WIDTH = {width}\n")
        proc = fwbench("models", "--model", f"torch:{tmp_path / 'net.py'}:build", "--json")
        assert proc.returncode == 0, proc.stderr
        (row,) = json.loads(proc.stdout)
        seen.append((row["name"], row["params"]))
    assert seen[0][1] == 4 * 3 + 3 and seen[1][1] == 4000 * 3 + 3
    assert seen[0][0] != seen[1][0]


# ONNX graphs whose inputs fwbench cannot write or feed, each one Relu.
ODD_INPUTS = """
import onnx
from onnx import TensorProto, helper

def save(name, shape, path):
    given = helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    graph = helper.make_graph([helper.make_node("Relu", [name], ["y"])], "g", [given], [out])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)

save("a=b", ["N", 4], "equals.onnx")
save("a,b", ["N", 4], "comma.onnx")
save("a b", ["N", 4], "space.onnx")
save("x", ["N", 100000, 100000], "huge.onnx")
save("x", [], "scalar.onnx")
save("x", ["N", 4], "good.onnx")

import numpy as np
from onnx import numpy_helper

ones = numpy_helper.from_array(np.ones(2, np.float32))
out = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
graph = helper.make_graph([helper.make_node("Constant", [], ["y"], value=ones)], "g", [], [out])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), "none.onnx")
"""


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("equals", "its input 'a=b' has a name fwbench cannot write"),
        ("comma", "its input 'a,b' has a name fwbench cannot write"),
        ("space", "its input 'a b' has a name fwbench cannot write"),
        ("huge", "(Bx100000x100000) is 10,000,000,000 elements per sample; at most"),
        ("scalar", "its input 'x' is a scalar (rank 0)"),
        # It was told to give --input-shape, which could not help.
        ("none", "its graph takes no inputs (it computes constants)"),
    ],
)
def test_inputs_fwbench_cannot_feed_are_one_line_not_unexpected(
    odd_inputs: Path, name: str, says: str
) -> None:
    """Issue 52, item 9: each ended as 'unexpected ValueError' (exit 1)."""
    db = odd_inputs / f"{name}.duckdb"
    proc = fwbench(
        "run", "--framework", "onnxruntime", "--model", str(odd_inputs / f"{name}.onnx"),
        "--task", "infer", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: model: ") and proc.stderr.count("\n") == 1
    assert says in proc.stderr, proc.stderr
    assert not db.exists()


@pytest.fixture(scope="module")
def odd_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("odd-inputs")
    make(ODD_INPUTS, folder)
    return folder


def test_a_damaged_entry_of_what_a_model_declares_is_read_again(
    odd_inputs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 52, item 9: an entry of the right key and wrong types was trusted."""
    import os

    from fwbench import cache
    from fwbench.catalog.models import get_model
    from fwbench.user_models import description_key

    monkeypatch.setenv("FWBENCH_CACHE_DIR", str(tmp_path))
    spec = get_model(str(odd_inputs / "good.onnx"))
    key = description_key(spec)
    cache.write("models", key, {"inputs": 5, "params": "many", "outputs": ""})
    proc = fwbench(
        "models", "--model", str(odd_inputs / "good.onnx"), "--json", env=dict(os.environ)
    )
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["inputs"] == "x=Bx4:float32" and row["params"] == 0, row
    assert cache.read("models", key)["inputs"] == "x=Bx4:float32"  # the entry read again


def test_training_a_model_without_parameters_is_refused_before_any_work(tmp_path: Path) -> None:
    """Issue 52, item 10: it ran and failed in the worker ('optimizer got an empty
    parameter list')."""
    (tmp_path / "nets.py").write_text(
        "def relu():\n    import torch\n\n    return torch.nn.ReLU()\n"
    )
    db = tmp_path / "never.duckdb"
    proc = fwbench(
        "run", "--framework", "torch", "--model", f"torch:{tmp_path / 'nets.py'}:relu",
        "--input-shape", "Bx4", "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "has no trainable parameters, so there is nothing to train" in proc.stderr
    assert not db.exists()


def test_a_dict_output_is_compared_with_its_export(tmp_path: Path) -> None:
    """Issue 52, item 10: a function whose module returns a dict failed on ONNX Runtime
    with "vars() argument must have __dict__"."""
    from tests.frameworks.test_your_model import run

    (tmp_path / "nets.py").write_text(
        "import torch\n\n\n"
        "class Heads(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.body = torch.nn.Linear(4, 3)\n\n"
        "    def forward(self, x):\n"
        "        return {'logits': self.body(x), 'probs': self.body(x).softmax(-1)}\n\n\n"
        "def build():\n"
        "    return Heads()\n"
    )
    records = run(
        "--framework", "torch", "--framework", "onnxruntime", "--model",
        "torch:nets.py:build", "--task", "infer", "--input-shape", "Bx4", "--batch-size", "2",
        db=tmp_path / "r.duckdb", cwd=tmp_path,
    )  # fmt: skip
    assert all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    exported = next(r for r in records if r["framework"] == "onnxruntime")
    assert exported["settings"]["output_check"] == "agrees"  # type: ignore[index]
    for r in records:
        check = str(r["settings"]["output_agreement"])  # type: ignore[index]
        assert check.startswith("passed") and "of 2 outputs" in check, check


def test_a_pt2_torch_cannot_read_says_why_not_check_the_warnings_above(tmp_path: Path) -> None:
    """Issue 52, item 10: torch logs why an archive did not read, then raises 'Please
    check the warnings above', which nobody was shown."""
    import zipfile

    with zipfile.ZipFile(tmp_path / "bad.pt2", "w") as archive:
        archive.writestr("archive/data.pkl", b"not a pickle")
    proc = fwbench("models", "--model", str(tmp_path / "bad.pt2"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "not a saved torch.export program (RuntimeError: " in proc.stderr
    assert "warnings above" not in proc.stderr, proc.stderr


def test_a_folder_whose_weights_do_not_fit_its_config_is_one_line(tmp_path: Path) -> None:
    """Issue 53, item 6: transformers refused it as 'You set `ignore_mismatched_sizes` to
    `False` ... look at the above report!', a report nobody was shown; and a config with
    more layers than the weights would have run with random ones."""
    env = {**os.environ, "FWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    made = subprocess.run(
        [sys.executable, "-m", "fwbench.models.sources.hf", "llama@tiny"],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    (weights,) = (tmp_path / "cache").glob("*/llama-tiny-*")
    folder = tmp_path / "my-llama"
    shutil.copytree(weights, folder)
    config = json.loads((folder / "config.json").read_text())
    config |= {"num_hidden_layers": 3, "intermediate_size": 2 * config["intermediate_size"]}
    (folder / "config.json").write_text(json.dumps(config))
    db = tmp_path / "never.duckdb"
    proc = fwbench(
        "run", "--framework", "torch", "--model", f"hf:{folder}", "--task", "generate",
        "--input-shape", "input_ids=Bx8", "--db", str(db), env=env,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith(
        f"error: model: hf:{folder}: its weights do not match its config.json: "
        "model.layers.0.mlp.down_proj.weight is [64, 128] in the weights, [64, 256] by "
        "config.json (and 5 more); 9 tensors of its model are not in the weights: "
    ), proc.stderr
    assert not db.exists()
