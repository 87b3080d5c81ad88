"""Model sources without a framework: which source a `--model` text names (the first in
the table's order that claims it), and what resolving finds wrong before any worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fwbench.catalog.sources import all_sources, get_source, source_of
from fwbench.errors import SpecError


@pytest.mark.parametrize(
    ("text", "source"),
    [
        ("net.keras", "keras"),
        ("keras:nets.py:build", "keras"),
        ("keras:pkg.module:build", "keras"),
        ("torch:/somewhere/nets.py:build", "torch_callable"),
        ("/somewhere/net.onnx", "onnx_file"),
        ("hf:/somewhere/folder", "hf"),
        ("/somewhere/nets.py:mlp", "twins"),
        ("./exported_model/", "saved_model"),
        ("resnet18", None),
    ],
)
def test_a_text_is_claimed_by_its_source(text: str, source: str | None) -> None:
    found = source_of(text)
    assert (found.name if found else None) == source


def test_the_order_is_the_tables_whichever_source_was_imported_first() -> None:
    """A runtime imports the SavedModel source for its constants; the SavedModel source,
    which claims any path, must still be asked last."""
    script = (
        "import fwbench.models.sources.saved_model\n"
        "from fwbench.catalog.sources import all_sources\n"
        "print(','.join(all_sources()))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ",".join(all_sources())
    assert list(all_sources())[-1] == "saved_model"


def test_what_resolving_finds_wrong_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "bad.keras").write_text("not a zip\n")
    (tmp_path / "folder").mkdir()
    cases = [
        (str(tmp_path / "bad.keras"), "not a Keras model file"),
        (str(tmp_path / "missing.keras"), "no such file"),
        (str(tmp_path / "folder"), "not a TensorFlow SavedModel (the folder has no saved_"),
        (str(tmp_path / "gone") + "/", "no such file or folder"),
        ("keras:nets.py", "write keras:module:function or keras:path/file.py:function"),
    ]
    for text, says in cases:
        source = source_of(text)
        assert source is not None, text
        with pytest.raises(SpecError, match=None) as found:
            source.resolve(text)
        assert says in str(found.value) and "\n" not in str(found.value), found.value


def test_a_keras_model_runs_on_keras_backends_and_the_runtimes_but_not_pytorch() -> None:
    assert {fw for fw, _ in get_source("keras").runs} >= {"tensorflow", "keras-jax", "keras-torch"}
    ok, why = get_source("keras").can("torch")
    assert not ok and "Keras 3's backends" in why
    assert "saved_model" in all_sources()


def test_a_decoder_runs_on_keras_where_keras_hub_reads_its_architecture(
    tmp_path: Path,
) -> None:
    """Issue 53: which frameworks run an hf: model is declared per architecture (what
    keras-hub reads), and a framework that cannot is refused before any work, with why."""
    import json

    from fwbench.case import Case
    from fwbench.catalog.models import get_model

    hf = get_source("hf")
    llama, neox = get_model("hf:llama@tiny"), get_model("hf:gpt_neox")
    for framework in ("torch", "tensorflow", "keras-jax", "keras-torch", "onnxruntime"):
        assert hf.can(framework, llama)[0], framework
    for framework in ("tensorflow", "keras-jax", "keras-torch"):
        ok, why = hf.can(framework, neox)
        assert not ok and "keras-hub reads no checkpoint of this architecture" in why
    assert hf.can("torch", neox)[0]
    with pytest.raises(SpecError, match="cannot run hf:gpt_neox: keras-hub reads no checkpoint"):
        Case.build(framework="keras-jax", model="hf:gpt_neox", task="infer",
                   inputs="input_ids=Bx8:int64<32000")  # fmt: skip
    # A folder is read by its config's model_type.
    for kind, runs in (("qwen2", True), ("gpt_neox", False)):
        folder = tmp_path / kind
        folder.mkdir()
        config = {"model_type": kind, "architectures": ["XForCausalLM"], "vocab_size": 100}
        (folder / "config.json").write_text(json.dumps(config))
        assert hf.can("keras-jax", get_model(f"hf:{folder}"))[0] is runs


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("hf:llama@huge", "no size 'huge'; valid: small, tiny, 1b, 8b"),
        ("hf:nope", "no built-in configuration for 'nope'; valid choices: hf:gpt2[@tiny]"),
    ],
)
def test_a_size_or_architecture_fwbench_does_not_hold_is_named(text: str, says: str) -> None:
    from fwbench.catalog.models import get_model

    with pytest.raises(SpecError, match=says.replace("[", r"\[")):
        get_model(text)


@pytest.mark.parametrize("code", ["0", "7"])
def test_a_file_of_twins_that_exits_at_import_is_one_line(
    code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 52, item 8: `fwbench models` ended with the file's exit code and no word."""
    from .test_robustness import cli

    (tmp_path / "nets.py").write_text(f"import sys\nsys.exit({code})\n")
    found, out, err = cli(["models", "--model", str(tmp_path / "nets.py") + ":mlp"], capsys)
    assert found == 2 and out == "", err
    assert f"importing nets.py called sys.exit({code})" in err and err.count("\n") == 1
