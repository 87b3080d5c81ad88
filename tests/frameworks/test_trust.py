"""Files users hand fwbench are data (issue 52): describing or running a downloaded
`.pt2` never unpickles more than `weights_only=True` allows nor loads compiled code.
The archives are made by a subprocess (the test process imports no framework)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import fwbench
from tests.frameworks.test_your_model import make

# A tiny exported program, then copies of it that torch.export.load would let run code:
# each writes MARKER when it is unpickled with weights_only=False.
ARCHIVES = """
import io, json, sys, zipfile
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
