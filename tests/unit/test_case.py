from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from fwbench.case import Case
from fwbench.errors import SpecError


def make(**kw: object) -> Case:
    fields: dict[str, object] = {"framework": "torch", "model": "resnet18", "threads": 2}
    fields.update(kw)
    return Case.build(**fields)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"framework": "mxnet"},
            "framework: unknown framework 'mxnet'; valid choices: torch, tensorflow",
        ),
        ({"model": "resnet19"}, "model: unknown model 'resnet19'; valid choices: bert_base, "),
        ({"mode": "graph"}, "mode: PyTorch has no 'graph' mode; valid choices for torch: eager"),
        ({"task": "trian"}, "task: unknown task 'trian'; valid choices: train, infer"),
        ({"device": "tpu"}, "device: invalid value 'tpu'; valid choices: 'cpu' or 'cuda'"),
        ({"input_size": 16}, "input_size: 16 is too small for resnet18; the smallest valid"),
        ({"seq_len": 16}, "seq_len: does not apply to resnet18, which takes image input; its"),
        ({"model": "bert_base", "input_size": 64}, "input_size: does not apply to bert_base"),
        ({"model": "bert_base", "vocab_size": 1}, "vocab_size: 1 is out of range (valid: 2 to"),
        ({"model": "deepspeech2", "seq_len": 4}, "seq_len: 4 is too small for deepspeech2"),
        ({"batch_size": 0}, "batch_size: Input should be greater than or equal to 1"),
        ({"colour": "red"}, "unknown key 'colour'"),
    ],
)
def test_invalid_cases_give_one_line_naming_key_and_choices(
    fields: dict[str, object], expected: str
) -> None:
    with pytest.raises(SpecError) as err:
        make(**fields)
    message = str(err.value)
    assert message.startswith(expected)
    assert "\n" not in message


def test_tensorflow_has_graph_mode_and_model_names_are_case_insensitive() -> None:
    case = make(framework="tensorflow", mode="graph", model="ResNet18")
    assert case.model == "resnet18"


def test_case_is_frozen_and_keyed_by_its_fields() -> None:
    a, b = make(batch_size=8), make(batch_size=8)
    assert a.key() == b.key()
    assert a.key() != make(batch_size=16).key()
    with pytest.raises(ValidationError):
        a.batch_size = 4  # type: ignore[misc]


def test_workload_key_ignores_framework_and_mode() -> None:
    t = make()
    tf = make(framework="tensorflow", mode="graph")
    assert t.workload_key() == tf.workload_key()
    assert t.key() != tf.key()


def test_dimensions_default_to_the_models_and_only_its_own_apply() -> None:
    image = make()
    assert image.dims == {"input_size": 224, "num_classes": 1000}
    assert image.shape == "224px c1000"
    bert = make(model="bert_base", seq_len=64)
    assert bert.dims == {"seq_len": 64, "vocab_size": 30522, "num_classes": 2}
    assert "input_size" not in bert.dims
    speech = make(model="deepspeech2")
    assert speech.shape == "seq200 f161 c29"


def test_image_case_keys_are_unchanged_by_the_sequence_dimensions() -> None:
    # A key recorded before seq_len/vocab_size/freq_bins existed (fwbench 0.1, schema 3)
    # must still match, or --resume would run recorded cases again.
    case = make(batch_size=8, input_size=64, num_classes=10)
    assert case.key() == _legacy_key(case)


def _legacy_key(case: Case) -> str:
    import hashlib
    import json

    fields = {
        k: case.flat()[k]
        for k in (
            "framework", "model", "task", "batch_size", "input_size", "num_classes",
            "device", "mode", "threads",
        )
    }  # fmt: skip
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def test_two_implementations_of_one_network_share_a_workload() -> None:
    fused, cell = make(model="lstm_lm"), make(model="lstm_lm_cell")
    assert fused.workload_key() == cell.workload_key()
    assert (fused.variant, cell.variant) == ("torch/eager", "torch/eager/cell")


# Each framework's documented fast path (README, docs/decisions.md): what a case that
# names no mode runs in, in every command.
DOCUMENTED_DEFAULTS = {
    "torch": "eager",
    "tensorflow": "graph",
    "keras-jax": "jit",
    "keras-torch": "eager",
    "onnxruntime": "optimized",
    "openvino": "latency",
    "litert": "fp32",
}


def test_a_case_without_a_mode_runs_the_frameworks_documented_default() -> None:
    from fwbench.catalog.frameworks import FRAMEWORKS

    for framework, mode in DOCUMENTED_DEFAULTS.items():
        assert FRAMEWORKS[framework].default_mode == mode
        case = Case.build(framework=framework, model="resnet18", task="infer", threads=2)
        assert case.mode == mode, framework
        explicit = Case.build(
            framework=framework, model="resnet18", task="infer", threads=2, mode=mode
        )
        assert case.key() == explicit.key()


def test_keys_of_stored_cases_are_unchanged_by_the_default_mode() -> None:
    """The mode is always in a case's key: a TensorFlow case stored before the default
    became graph (it ran eagerly) keeps its key, and a new default case is a new case."""
    workload = {"model": "resnet18", "task": "infer", "batch_size": 8, "input_size": 64}
    eager = make(framework="tensorflow", mode="eager", **workload)
    assert eager.key() == "2d51314269e61e4b"  # as computed before the change
    assert make(framework="tensorflow", **workload).key() != eager.key()
    assert make(**workload).key() == "0d35e008645dd026"  # torch: eager, as before


def test_a_strategy_without_a_mode_takes_a_mode_it_runs_in() -> None:
    case = make(framework="tensorflow", strategy="multiworker", world_size=2)
    assert case.mode == "graph"
    assert make(strategy="ddp", world_size=2).mode == "eager"


def test_a_global_batch_past_what_is_stored_is_refused_when_the_case_is_made(
    tmp_path: Path,
) -> None:
    """Each field within its bounds, their product past the stored 32-bit global batch:
    its result, an oom at once, could not be stored, and the sweep ended on a DuckDB
    error. The largest case allowed is stored."""
    from datetime import datetime

    from fwbench.result import Result
    from fwbench.store.db import ResultStore

    largest = make(strategy="ddp", world_size=127, batch_size=1 << 24)
    oom = Result(
        result_id="x", invocation_id="i", recorded_at=datetime.now(), case=largest,
        status="oom", error="out of memory",
    )  # fmt: skip
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.add(oom)
        assert store.results()[0].global_batch_size == 127 << 24
    with pytest.raises(SpecError, match="16777216 a replica x 128 replicas is 2147483648"):
        make(strategy="ddp", world_size=128, batch_size=1 << 24)


def test_every_command_builds_its_cases_with_the_default_modes() -> None:
    """run, serve and explain build cases through cases_per_framework; sweep through
    the sweep parser; tune's baseline through default_case."""
    from fwbench.cli.common import cases_per_framework
    from fwbench.sweep import parse
    from fwbench.tune import default_case

    frameworks = list(DOCUMENTED_DEFAULTS)
    workload = {"model": "resnet18", "task": "infer", "batch_size": 8, "input_size": 64}
    built = cases_per_framework(frameworks, [], **workload)
    assert {c.framework: c.mode for c in built} == DOCUMENTED_DEFAULTS
    # explain with a stored case: its own mode for its framework, defaults for the rest.
    mixed = cases_per_framework(["torch", "tensorflow"], ["compile", None], **workload)
    assert [c.mode for c in mixed] == ["compile", "graph"]
    swept = parse(
        f"model: resnet18\ntask: infer\ninput_size: 64\nframework: [{', '.join(frameworks)}]\n"
    )
    assert {c.framework: c.mode for c in swept.cases} == DOCUMENTED_DEFAULTS
    for framework, mode in DOCUMENTED_DEFAULTS.items():
        assert default_case(framework, workload).mode == mode


def test_a_verdict_between_eager_and_compiled_says_so() -> None:
    from fwbench.case import execution_note

    torch_eager, tf_graph = make(), make(framework="tensorflow", mode="graph")
    assert execution_note(torch_eager, tf_graph) == " [eager vs compiled]"
    assert execution_note(tf_graph, torch_eager) == " [eager vs compiled]"
    assert execution_note(torch_eager, make(framework="tensorflow", mode="eager")) == ""
    assert execution_note(make(mode="compile"), tf_graph) == ""


def test_a_verdict_between_numerics_says_so() -> None:
    """A runtime's quantised mode computes otherwise than an fp32 framework, which the
    verdict says like eager against compiled (the registry's mode_numerics)."""
    from fwbench.case import execution_note

    workload = {"model": "resnet18", "task": "infer"}
    tf_graph = make(framework="tensorflow", mode="graph", **workload)
    fp32, int8, fp16 = (
        make(framework="litert", mode=m, **workload) for m in ("fp32", "int8", "fp16")
    )
    assert (fp32.numerics, int8.numerics, fp16.numerics) == (
        "fp32",
        "dynamic-range int8",
        "fp16 weights",
    )
    assert execution_note(fp32, tf_graph) == ""
    assert execution_note(int8, tf_graph) == " [dynamic-range int8 vs fp32]"
    assert execution_note(tf_graph, fp16) == " [fp32 vs fp16 weights]"
    assert execution_note(make(framework="tensorflow", mode="eager", **workload), int8) == (
        " [eager vs compiled] [fp32 vs dynamic-range int8]"
    )


def test_options_are_canonical_validated_and_named_in_the_variant() -> None:
    tf = {"framework": "tensorflow", "model": "resnet18", "threads": 2}
    case = Case.build(**tf, options=" OneDNN = off ")
    assert case.options == "onednn=off" and case.variant == "tensorflow/graph/onednn=off"
    assert case.option_values == {"onednn": "off"}
    assert case.option_env() == {"TF_ENABLE_ONEDNN_OPTS": "0"}
    assert Case.build(**tf, options="onednn=on").option_env() == {"TF_ENABLE_ONEDNN_OPTS": "1"}
    # None, "" and "default" are the framework deciding: the key every result had before.
    plain = Case.build(**tf)
    for none in ("", "default", None):
        assert Case.build(**tf, options=none).key() == plain.key()
    assert case.key() != plain.key()
    ort = Case.build(
        framework="onnxruntime", model="resnet18", task="infer", options="spinning=off"
    )
    assert ort.option_env() == {}  # the adapter applies it, not the environment
    for bad, message in (
        ("onednn", "options: 'onednn' is not NAME=VALUE (e.g. onednn=off)"),
        ("onednn=maybe", "options: onednn=maybe is not a value of onednn; valid choices: on, off"),
        ("spinning=off", "options: TensorFlow has no setting 'spinning'; valid choices for "),
        ("onednn=on,onednn=off", "options: onednn given twice (on, off)"),
    ):
        with pytest.raises(SpecError) as err:
            Case.build(**tf, options=bad)
        assert str(err.value).startswith(message)
    with pytest.raises(
        SpecError, match="PyTorch has no setting 'onednn'; valid choices for torch: none"
    ):
        make(options="onednn=off")


def test_options_per_framework_in_commands_sweeps_and_tune() -> None:
    from fwbench.cli.common import cases_per_framework
    from fwbench.sweep import parse
    from fwbench.tune import option_sets, search_space

    workload = {"model": "resnet18", "task": "infer", "batch_size": 8, "input_size": 64}
    built = cases_per_framework(
        ["tensorflow", "tensorflow"], [], options=["onednn=on", "onednn=off"], **workload
    )
    assert [c.variant for c in built] == [
        "tensorflow/graph/onednn=on",
        "tensorflow/graph/onednn=off",
    ]
    mixed = cases_per_framework(
        ["torch", "tensorflow"], [], options=["default", "onednn=off"], **workload
    )
    assert [c.options for c in mixed] == [None, "onednn=off"]
    # A framework a mapping leaves out runs without options (it is not dropped).
    swept = parse(
        "model: resnet18\ntask: infer\nframework: [torch, tensorflow]\n"
        "options: {tensorflow: [onednn=on, onednn=off]}\n"
    )
    assert [c.variant for c in swept.cases] == [
        "torch/eager",
        "tensorflow/graph/onednn=on",
        "tensorflow/graph/onednn=off",
    ]
    assert option_sets("tensorflow") == ["onednn=on", "onednn=off"]
    assert option_sets("torch") == [None]
    assert option_sets("tensorflow", ["onednn=off", "spinning=off"]) == ["onednn=off"]
    assert option_sets("onnxruntime", ["onednn=off", "default"]) == [None]
    tried = search_space(["tensorflow"], {**workload, "threads": 2}, ["graph"], ["fp32"])
    assert {c.options for c in tried} == {"onednn=on", "onednn=off"}
    # A setting of one mode: given in another, refused; tuned in its mode alone, the
    # other modes still tried (without it).
    with pytest.raises(SpecError, match="options: state applies to mode jit only, not nnx-jit"):
        Case.build(**workload, framework="flax", mode="nnx-jit", options="state=arrays")
    from fwbench.cli.choices import options_help

    assert "flax: state=variables|arrays (mode jit)" in options_help()
    assert "decoding=stream|loop (task generate)" in options_help()
    assert option_sets("flax", mode="eager") == [None]
    # A setting's fixed default is tried as the default case itself, not as a twin.
    assert option_sets("flax", mode="jit") == [None, "state=arrays"]
    assert option_sets("onnxruntime") == [None, "spinning=off"]
    # What a case runs a setting at: the value it sets, else the fixed default, else
    # None where the framework decides.
    ort = {**workload, "framework": "onnxruntime"}
    assert Case.build(**ort).setting_value("spinning") == "on"
    assert Case.build(**ort, options="spinning=off").setting_value("spinning") == "off"
    assert Case.build(**workload, framework="tensorflow").setting_value("onednn") is None
    tried = search_space(["flax"], {**workload, "threads": 2}, precisions=["fp32"])
    assert sorted(c.variant for c in tried) == [
        "flax/eager",
        "flax/jit",
        "flax/jit/state=arrays",
        "flax/nnx-jit",
    ]
    # A setting none of the frameworks has is refused with theirs, not left out.
    with pytest.raises(SpecError, match=r"no tensorflow setting 'onedn'; valid choices: .*onednn"):
        search_space(["tensorflow"], workload, options=["onedn=off"])
    # A value no candidate can take was dropped from the search without a word (a mode,
    # precision, thread count or setting's value beside a valid one), or all of them
    # read "no valid configuration; widen --mode / --precision".
    refused = {
        "--mode: no torch mode 'nope'; valid choices: compile": {"modes": ["eager", "nope"]},
        "--precision fp64: no candidate can take it: precision: invalid value 'fp64'": {
            "precisions": ["fp32", "fp64"]
        },
        "--precision tf32: no candidate can take it: precision: tf32 is a tensor-core": {
            "precisions": ["tf32"]
        },
        "--threads -1: no candidate can take it: threads: Input should be greater": {
            "threads": [2, -1]
        },
    }
    for says, given in refused.items():
        with pytest.raises(SpecError, match="^" + re.escape(says)):
            search_space(["torch"], workload, **given)  # type: ignore[arg-type]
    with pytest.raises(SpecError, match=re.escape("--options onednn=maybe: no candidate can")):
        search_space(["tensorflow"], workload, ["graph"], options=["onednn=on", "onednn=maybe"])


def test_a_sequence_past_the_models_context_is_refused_for_every_task() -> None:
    """--task infer --seq-len 129 grew gpt2_tiny past its 128 positions without a word,
    while generate refused it (issue 43, defect 9)."""
    for task in ("infer", "train"):
        with pytest.raises(SpecError, match="seq_len: 129 is past gpt2_tiny's context of 128"):
            Case.build(framework="torch", model="gpt2_tiny", task=task, seq_len=129)
    assert Case.build(framework="torch", model="gpt2_tiny", task="infer", seq_len=128)


def test_dim_takes_a_tasks_dimension_as_task_dims_does() -> None:
    from fwbench.cli.workload import Workload

    def case(**flags: object) -> Case:
        workload = Workload(task="generate", batch_size=1, device="cpu", **flags)  # type: ignore[arg-type]
        (found,) = workload.cases("gpt2_tiny", ["torch"])
        return found

    by_dim = case(dim=["new_tokens=5", "seq_len=16"])
    by_flags = case(task_dims="new_tokens=5", seq_len=16)
    assert by_dim.task_dims == by_flags.task_dims == "new_tokens=5"
    assert by_dim.dims["seq_len"] == 16
    assert by_dim.key() == by_flags.key()
    assert case(dim=["new_tokens=5"], task_dims="new_tokens=5").task_dims == "new_tokens=5"
    with pytest.raises(SpecError, match="new_tokens: given twice"):
        case(dim=["new_tokens=5"], task_dims="new_tokens=6")
