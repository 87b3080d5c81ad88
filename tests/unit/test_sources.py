"""Model sources without a framework: which source a `--model` text names (the first in
the table's order that claims it), and what resolving finds wrong before any worker."""

from __future__ import annotations

import re
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
        ("hf:" + str(tmp_path / "preset"), "names a Keras object (registered_name): a keras-hub"),
    ]
    # A keras-hub preset's config, which keras-hub would read as Keras objects and
    # weights of its own, whatever transformers' fields it also holds.
    (tmp_path / "preset").mkdir()
    (tmp_path / "preset" / "config.json").write_text(
        '{"model_type": "llama", "registered_name": "keras_hub>LlamaBackbone"}'
    )
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


def test_a_folder_whose_rotary_positions_a_framework_would_not_scale_is_refused_there(
    tmp_path: Path,
) -> None:
    """keras-hub reads Llama 3's scaled rotary positions (from either place transformers
    writes them) and runs the others unscaled; Flax's decoder computes `linear` and
    `llama3`: a folder is refused, before any work and with why, where a framework would
    compute another model than PyTorch."""
    import json

    from fwbench.case import Case
    from fwbench.catalog.models import get_model
    from fwbench.models.sources import hf as source

    hf = get_source("hf")
    llama3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 32}  # fmt: skip
    yarn = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}
    found = {}
    for name, kind, rope in (
        ("llama-3.1", "llama", {"rope_parameters": {**llama3, "rope_theta": 5e5}}),
        ("llama-3.1-hub", "llama", {"rope_scaling": llama3, "rope_theta": 5e5}),
        ("qwen2.5-yarn", "qwen2", {"rope_scaling": yarn}),
        # rope_scaling replaces rope_parameters where both are given, as transformers reads it
        ("both", "qwen2", {"rope_parameters": {"rope_type": "default"}, "rope_scaling": yarn}),
        ("mistral-linear", "mistral", {"rope_scaling": {"rope_type": "linear", "factor": 2.0}}),
    ):
        folder = tmp_path / name
        folder.mkdir()
        config = {"model_type": kind, "architectures": ["XForCausalLM"],
                  **source.ARCHS[kind].config("tiny"), **rope}  # fmt: skip
        (folder / "config.json").write_text(json.dumps(config))
        model = get_model(f"hf:{folder}")
        found[name] = {fw: hf.can(fw, model) for fw in ("torch", "keras-jax", "flax")}
    for name in ("llama-3.1", "llama-3.1-hub"):
        assert all(ok for ok, _ in found[name].values()), found[name]
    ok, why = found["qwen2.5-yarn"]["keras-jax"]
    assert not ok and why.startswith("keras-hub's qwen2 converter reads no yarn rotary"), why
    ok, why = found["qwen2.5-yarn"]["flax"]
    assert not ok and why.startswith("Flax's decoder has no yarn rotary positions"), why
    assert found["both"]["torch"][0] and not any(ok for ok, _ in list(found["both"].values())[1:])
    assert found["mistral-linear"]["flax"][0] and not found["mistral-linear"]["keras-jax"][0]
    assert found["qwen2.5-yarn"]["torch"][0]
    with pytest.raises(SpecError, match=r"cannot run hf:qwen2\.5-yarn@\w+: keras-hub's qwen2 conv"):
        Case.build(framework="tensorflow", model=f"hf:{tmp_path / 'qwen2.5-yarn'}",
                   task="infer", inputs="input_ids=Bx8:int64<512")  # fmt: skip


def test_keras_runs_a_folder_only_as_far_as_its_sliding_window_is_kept_and_flax_further(
    tmp_path: Path,
) -> None:
    """keras-hub keeps Mistral's sliding window, Gemma 2's and 3's on the layers its own
    models slide, and drops Qwen's, Phi-3's and SmolLM3's (measured: logits 0.4-0.8 off
    past a window of 4, 2e-7 within it). So a case in a Keras backend is refused before
    any work where it fills more positions than such a window; Flax's decoder keeps
    every window; a Gemma 3 whose layers keras-hub would rotate otherwise is refused
    there whatever its length."""
    import json

    from fwbench.case import Case
    from fwbench.catalog.models import get_model
    from fwbench.models.sources import hf as source

    def folder(name: str, arch: str, **extra: object) -> str:
        path = tmp_path / name
        path.mkdir()
        kind = source.ARCHS[arch].model_type or arch
        config = {"model_type": kind, "architectures": ["XForCausalLM"],
                  **source.ARCHS[arch].config("tiny"), **extra}  # fmt: skip
        (path / "config.json").write_text(json.dumps(config))
        return f"hf:{path}"

    sliding = {"sliding_window": 4, "layer_types": ["sliding_attention"] * 2}
    mistral = folder("mistral", "mistral", sliding_window=4)
    qwen2 = folder("qwen2", "qwen2", use_sliding_window=True, **sliding)
    phi3 = folder("phi3-mini", "phi3", sliding_window=2047, max_position_embeddings=4096)
    wide = folder("wide", "qwen2", use_sliding_window=True, **{**sliding, "sliding_window": 128})
    gemma3 = folder("gemma3", "gemma3", sliding_window=4,
                    layer_types=["sliding_attention", "full_attention"])  # fmt: skip

    def case(framework: str, model: str, tokens: int, task: str = "infer") -> Case:
        return Case.build(framework=framework, model=model, task=task,
                          inputs=f"input_ids=Bx{tokens}:int64<512")  # fmt: skip

    for framework in ("tensorflow", "keras-jax", "keras-torch", "flax", "torch"):
        case(framework, mistral, 40)
        case(framework, wide, 40)
        case(framework, qwen2, 4)
    # Phi-3 mini's window of 2,047 in a context of 4,096: kept up to 2,047 positions.
    assert [(k, n) for k, (n, _) in get_model(phi3).alike_within.items()] == [("tensorflow", 2047)]
    for framework in ("flax", "torch"):
        case(framework, qwen2, 40)
        case(framework, gemma3, 40)
    says = r"computes hf:qwen2@\w+ as transformers does up to 4 positions only \(keras-hub's "
    with pytest.raises(SpecError, match=says + "qwen2 slides no window .*this case fills 8"):
        case("keras-jax", qwen2, 8)
    with pytest.raises(SpecError, match="this case fills 6"):  # the new tokens count
        Case.build(framework="tensorflow", model=qwen2, task="generate",
                   inputs="input_ids=Bx2:int64<512", task_dims="new_tokens=4")  # fmt: skip
    ok, why = get_source("hf").can("keras-jax", get_model(gemma3))
    assert not ok and "places a global layer after every five sliding ones" in why, why


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


@pytest.mark.parametrize(
    ("source", "reference", "runs_code"),
    [
        ("torch_callable", "torch:nets.py:build", "the file's Python code"),
        ("keras", "keras:nets.py:build", "the file's Python code"),
        ("keras", "/models/net.keras", ""),
        ("twins", "/models/nets.py:mlp", "the file's Python code"),
        ("saved_model", "/models/exported/", "a TensorFlow program"),
        ("torch_export", "/models/net.pt2", ""),
        ("onnx_file", "/models/net.onnx", ""),
        ("hf", "hf:llama", ""),
        ("timm", "timm:resnet18", ""),
    ],
)
def test_each_source_says_whether_its_authors_code_runs(
    source: str, reference: str, runs_code: str
) -> None:
    """Issue 52, item 3: `fwbench models` and docs/your-model.md say which sources run
    code of the file's author (a SavedModel's graph may write files) and which are data."""
    from fwbench.catalog.models import ModelSpec

    spec = ModelSpec(name="m", family="user", input_kind="tensors", reference=reference)
    said = get_source(source).runs_code(spec)
    assert (runs_code in said) if runs_code else said == "", said


def test_a_models_identity_follows_the_local_modules_its_file_imports(tmp_path: Path) -> None:
    """Issue 52, item 6: a network changed through a helper module kept its old name."""
    from fwbench.models.sources.common import code_digest

    net = tmp_path / "net.py"
    net.write_text(
        "import os\nimport helper\nfrom layers.blocks import block\nfrom parts.wide import W\n"
    )
    (tmp_path / "helper.py").write_text("WIDTH = 4\n")
    (tmp_path / "layers").mkdir()
    (tmp_path / "layers" / "__init__.py").write_text("")
    (tmp_path / "layers" / "blocks.py").write_text("from .sizes import SIZE\nblock = 1\n")
    (tmp_path / "layers" / "sizes.py").write_text("SIZE = 3\n")
    (tmp_path / "parts").mkdir()  # no __init__.py: a namespace package
    (tmp_path / "parts" / "wide.py").write_text("W = 8\n")
    (tmp_path / "unrelated.py").write_text("x = 1\n")
    first = code_digest(net)
    (tmp_path / "unrelated.py").write_text("x = 2\n")  # not imported: the same model
    assert code_digest(net) == first
    for changed, text in (
        ("helper.py", "WIDTH = 4000\n"),
        ("layers/sizes.py", "SIZE = 30\n"),  # imported by an imported module
        ("parts/wide.py", "W = 4096\n"),
    ):
        (tmp_path / changed).write_text(text)
        assert code_digest(net) != first, changed
        first = code_digest(net)


def test_a_helper_that_is_a_device_or_a_pipe_is_refused_not_read(tmp_path: Path) -> None:
    """Issue 52, item 7: hashing never reads from a device or a FIFO (it would hang)."""
    import os

    from fwbench.models.sources.common import code_digest

    net = tmp_path / "net.py"
    net.write_text("import helper\nimport piped\n")
    (tmp_path / "helper.py").symlink_to("/dev/zero")
    with pytest.raises(SpecError, match=re.escape("helper.py: not a regular Python file")):
        code_digest(net)
    (tmp_path / "helper.py").unlink()
    os.mkfifo(tmp_path / "piped.py")
    with pytest.raises(SpecError, match=re.escape("piped.py: not a regular Python file")):
        code_digest(net)


@pytest.mark.parametrize("hazard", ["device", "fifo", "outside"])
def test_a_model_folder_holding_a_device_a_pipe_or_a_way_out_is_refused(
    tmp_path: Path, hazard: str
) -> None:
    """Issue 52, item 7: a SavedModel folder with a link to /dev/zero, or a FIFO, hung
    `fwbench models` and `import` forever while its files were hashed."""
    import os

    folder = tmp_path / "exported"
    (folder / "variables").mkdir(parents=True)
    (folder / "saved_model.pb").write_bytes(b"\x08\x01")
    odd = folder / "variables" / "variables.data-00000-of-00001"
    if hazard == "device":
        odd.symlink_to("/dev/zero")
    elif hazard == "fifo":
        os.mkfifo(odd)
    else:
        (tmp_path / "elsewhere").write_bytes(b"x")
        odd.symlink_to(tmp_path / "elsewhere")
    says = "leads out of the folder" if hazard == "outside" else "is not a regular file"
    proc = subprocess.run(
        [sys.executable, "-m", "fwbench", "models", "--model", str(folder)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


@pytest.mark.parametrize(
    ("code", "says"),
    [
        ("import time\ntime.sleep(60)\n", "importing nets.py did not finish in 2 s"),
        ("import os\nos._exit(5)\n", "importing nets.py ended the process (exit code 5)"),
        ("import sys\nsys.stdout.close()\n", "importing nets.py closed the standard output"),
        ("raise RuntimeError('no GPU here')\n", "importing nets.py failed: RuntimeError: no GPU"),
    ],
)
def test_a_file_of_twins_that_hangs_or_ends_the_process_at_import_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str, says: str
) -> None:
    """Issue 52, items 7 and 8: imported in the command's process, a sleeping file hung
    it and os._exit ended it without a word; it is imported alone first, with a deadline."""
    from fwbench.models.sources import twins

    monkeypatch.setattr(twins, "IMPORT_TIMEOUT_S", 2.0)
    (tmp_path / "nets.py").write_text(code)
    with pytest.raises(SpecError, match=re.escape(says)):
        twins.resolve(f"{tmp_path / 'nets.py'}:mlp")


def test_a_decoders_tokens_past_its_context_are_refused_before_any_work() -> None:
    """Issue 52, item 10: `hf:` inference past the context failed in the worker with
    'index out of range'."""
    from fwbench.case import Case

    with pytest.raises(SpecError, match=re.escape("input_shape: 5000 tokens are past hf:gpt2")):
        Case.build(
            framework="torch", model="hf:gpt2", task="infer", batch_size=1,
            inputs="input_ids=Bx5000:int64",
        )  # fmt: skip


@pytest.mark.parametrize("given", ["/proc/fwbench-nowhere", "/dev/null/cache"])
def test_a_cache_folder_the_user_named_and_cannot_be_used_is_one_line(
    tmp_path: Path, given: str
) -> None:
    """Issue 52, item 10: hf: models failed as 'model: hf:llama: FileNotFoundError';
    others silently cached nothing."""
    import os

    db = tmp_path / "never.duckdb"
    proc = subprocess.run(
        [sys.executable, "-m", "fwbench", "run", "--framework", "torch", "--model", "resnet18",
         "--task", "infer", "--db", str(db)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "FWBENCH_CACHE_DIR": given},
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: FWBENCH_CACHE_DIR: {given} cannot hold")
    assert not db.exists()


@pytest.mark.parametrize(
    "config",
    [
        {"model_type": "gemma3_text", "num_hidden_layers": 8, "sliding_window": 512},
        {"model_type": "gemma3_text", "num_hidden_layers": 4, "sliding_window_pattern": 2},
        {"model_type": "gemma2", "num_hidden_layers": 4},
        {"model_type": "gemma2", "num_hidden_layers": 3, "sliding_window": 8},
    ],
)
def test_flax_slides_the_layers_transformers_derives_for_a_gemma_without_layer_types(
    config: dict[str, object],
) -> None:
    """Gemma 2's and 3's published configs name no `layer_types`: transformers derives
    them (every second, or every `sliding_window_pattern`-th, layer full; the others
    sliding, with the family's window of 4,096 unless given), and Flax's decoder slides
    the same layers, so Gemma 3's sliding layers also take its local rotary base."""
    from transformers import AutoConfig

    from fwbench.models.llama_family import sliding_windows

    given = {k: v for k, v in config.items() if k != "model_type"}
    theirs = AutoConfig.for_model(str(config["model_type"]), **given)
    expected = tuple(
        theirs.sliding_window if kind == "sliding_attention" else None
        for kind in theirs.layer_types
    )
    assert sliding_windows(config) == expected
    assert None in expected and any(expected)


@pytest.mark.parametrize(
    "config",
    [
        {"model_type": "llama", "head_dim": 16},
        {"model_type": "gemma2", "head_dim": 16, "query_pre_attn_scalar": 64},
        {"model_type": "gemma3_text", "head_dim": 16, "query_pre_attn_scalar": 48},
    ],
)
def test_flax_scales_attention_scores_as_transformers_does(config: dict[str, object]) -> None:
    """Gemma 2 and 3 divide the scores by the root of their own scalar, the others by the
    head's width's; a Config made without a scalar scales by the head's width too."""
    import dataclasses

    from transformers import AutoConfig
    from transformers.models.auto.modeling_auto import AutoModelForCausalLM

    from fwbench.models.llama_family import Config

    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1}
    sizes |= {"num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64}
    given = {k: v for k, v in config.items() if k != "model_type"} | sizes
    theirs = AutoConfig.for_model(str(config["model_type"]), **given)
    model = AutoModelForCausalLM.from_config(theirs)
    expected = model.model.layers[0].self_attn.scaling
    ours = Config.of(theirs.to_dict())
    assert ours.query_scale == pytest.approx(expected, rel=1e-12)
    assert dataclasses.replace(ours, query_scalar=None).query_scale == 16**-0.5


def test_an_onnx_models_identity_holds_every_file_its_weights_are_kept_in(
    tmp_path: Path,
) -> None:
    """External data may be named anything (each tensor's `location`), not only torch.onnx's
    FILE.onnx.data: a change to any such file is another model."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    from fwbench.models.sources import onnx_file

    weights = [numpy_helper.from_array(np.full((4, 4), 0.5, np.float32), name=n) for n in "ab"]
    steps = (("x", "a", "h"), ("h", "b", "y"))
    nodes = [helper.make_node("MatMul", [i, w], [o]) for i, w, o in steps]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["batch", 4])], weights,
    )  # fmt: skip
    model = helper.make_model(graph)
    for tensor, location in zip(model.graph.initializer, ("first.bin", "second.bin"), strict=True):
        onnx.external_data_helper.set_external_data(tensor, location)
        (tmp_path / location).write_bytes(tensor.raw_data)
        tensor.ClearField("raw_data")
        tensor.data_location = onnx.TensorProto.EXTERNAL
    path = tmp_path / "net.onnx"
    onnx.save(model, str(path))
    assert onnx_file.external_files(path) == ["first.bin", "second.bin"]
    before = onnx_file.resolve(str(path)).digest
    second = tmp_path / "second.bin"
    second.write_bytes(np.full((4, 4), 0.25, np.float32).tobytes())
    assert onnx_file.resolve(str(path)).digest != before


def test_an_onnx_models_identity_holds_the_files_its_local_functions_read(
    tmp_path: Path,
) -> None:
    """A constant inside one of the model's local functions may keep its bytes in a file
    of its own too (onnx.load reads it): a change to it is another model."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    from fwbench.models.sources import onnx_file

    constant = numpy_helper.from_array(np.ones(3, np.float32), "c")
    constant.ClearField("raw_data")
    constant.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "w.bin"), ("offset", "0"), ("length", "12")):
        entry = constant.external_data.add()
        entry.key, entry.value = key, value
    body = [
        helper.make_node("Constant", [], ["c"], value=constant),
        helper.make_node("Add", ["x", "c"], ["y"]),
    ]
    function = helper.make_function(
        "local", "F", ["x"], ["y"], body, opset_imports=[helper.make_opsetid("", 17)]
    )
    value = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in ("x", "y")]
    graph = helper.make_graph([helper.make_node("F", ["x"], ["y"], domain="local")], "g",
                              value[:1], value[1:])  # fmt: skip
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    model = helper.make_model(graph, functions=[function], opset_imports=opsets)
    path = tmp_path / "net.onnx"
    path.write_bytes(model.SerializeToString())
    (tmp_path / "w.bin").write_bytes(np.ones(3, np.float32).tobytes())
    assert onnx_file.external_files(path) == ["w.bin"]
    before = onnx_file.resolve(str(path)).digest
    (tmp_path / "w.bin").write_bytes(np.full(3, 100.0, np.float32).tobytes())
    assert onnx_file.resolve(str(path)).digest != before


def test_a_models_description_is_read_again_under_another_library_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an `hf:` or `timm:` model declares (its parameters, its default input size)
    is transformers' or timm's to say: a description cached under one version of the
    library is not taken for another's."""
    from fwbench import cache, user_models
    from fwbench.catalog.models import get_model

    monkeypatch.setenv(cache.ENV, str(tmp_path))
    read: list[str] = []

    def worker(reference: str) -> dict[str, object]:  # the describing worker's answer
        read.append(reference)
        return {"inputs": "", "defaults": "", "outputs": "", "params": 1}

    monkeypatch.setattr(user_models.describing, "describe", worker)
    spec = get_model("hf:gpt2@tiny")
    user_models.describe(spec)
    user_models.describe(spec)
    assert len(read) == 1  # the second from the cache
    real = user_models._installed
    monkeypatch.setattr(
        user_models, "_installed", lambda d: "0.0" if d == "transformers" else real(d)
    )
    user_models.describe(spec)
    assert len(read) == 2


def test_a_folders_weights_are_the_files_transformers_reads(tmp_path: Path) -> None:
    """A release keeps `consolidated.safetensors` beside its indexed shards: the same
    weights under another name. Read too, they doubled the parameter count (a false
    out-of-memory refusal) and left Flax weights without a place."""
    import json

    import numpy as np
    from safetensors.numpy import save_file

    from fwbench.models.sources.hf import stored_count, weight_files

    one = {"w": np.zeros((2, 3), np.float32)}
    save_file(one, str(tmp_path / "model.safetensors"))
    save_file(one, str(tmp_path / "consolidated.safetensors"))
    assert weight_files(tmp_path) == [tmp_path / "model.safetensors"]
    assert stored_count(tmp_path) == 6
    save_file({"a": np.zeros(4, np.float32)}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file({"b": np.zeros(5, np.float32)}, str(tmp_path / "model-00002-of-00002.safetensors"))
    index = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": index}))
    assert stored_count(tmp_path) == 9  # the index wins, as in transformers
    (tmp_path / "model.safetensors.index.json").write_text("[]")
    with pytest.raises(SpecError, match="not the index of a safetensors checkpoint"):
        weight_files(tmp_path)


def test_a_folders_identity_follows_every_byte_of_its_weights_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tensor changed in the middle of a 3 MiB file (a fine-tune that leaves the ends
    alone) is another model: the name had hashed each file's first and last MiB only.
    The file's hash is then kept, and read from the cache while the file is unchanged."""
    import numpy as np
    from safetensors.numpy import save_file

    from fwbench import cache
    from fwbench.models.sources import hf

    monkeypatch.setenv(cache.ENV, str(tmp_path / "cache"))
    folder = tmp_path / "ckpt"
    folder.mkdir()
    tensors = {n: np.full(2**18, i, np.float32) for i, n in enumerate(("a", "b", "c"))}
    save_file(tensors, str(folder / "model.safetensors"))
    before = hf._folder_digest(folder, "{}")
    assert len(list((tmp_path / "cache" / "file-sha256").iterdir())) == 1
    hashed: list[Path] = []
    real_open = Path.open

    def counted(self: Path, *args: object, **kwargs: object) -> object:
        hashed.append(self)
        return real_open(self, *args, **kwargs)  # type: ignore[call-overload]

    with monkeypatch.context() as m:
        m.setattr(Path, "open", counted)
        assert hf._folder_digest(folder, "{}") == before
    assert folder / "model.safetensors" not in hashed  # the cached hash, not the bytes
    save_file({**tensors, "b": tensors["b"] * 1000}, str(folder / "model.safetensors"))
    assert hf._folder_digest(folder, "{}") != before


def test_a_config_without_a_familys_keys_is_read_as_transformers_reads_it() -> None:
    """A hand-written or older config.json may leave keys out: Gemma 2's caps (50, 30)
    and scalar (256), SmolLM3's tied embeddings, Phi-3's epsilon (1e-5). Flax's decoder
    took Llama's values for them, and refused nothing."""
    import warnings

    from transformers import AutoConfig

    from fwbench.models.llama_family import FAMILIES, Config

    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2}
    sizes |= {"num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 64}
    sizes |= {"head_dim": 16}
    for kind in FAMILIES:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = AutoConfig.for_model(kind, **sizes).to_dict()
        assert Config.of({"model_type": kind, **sizes}) == Config.of(theirs), kind


def test_a_cache_write_that_fails_leaves_no_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fwbench import cache

    monkeypatch.setenv(cache.ENV, str(tmp_path))
    with pytest.raises(TypeError):
        cache.write("models", "k", {"not json": object()})
    cache.write("models", "k", {"fine": 1})
    assert [p.name.startswith(".") for p in (tmp_path / "models").iterdir()] == [False]
    assert cache.read("models", "k") == {"fine": 1}
