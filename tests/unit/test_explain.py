from __future__ import annotations

from pathlib import Path

import pytest

from fwbench.errors import SpecError
from fwbench.explain.breakdown import Breakdown, build
from fwbench.explain.categories import IDLE, Categoriser, load_rules
from fwbench.explain.timeline import Event, Window, attribute, attribute_ranges

CATEGORISE = Categoriser()


def ev(thread: str, start: float, end: float, name: str, text: str | None = None) -> Event:
    return Event(thread, start, end, name, text or name)


def test_nested_events_give_their_time_to_the_innermost() -> None:
    events = [
        ev("t", 0.0, 10.0, "aten::conv2d"),
        ev("t", 1.0, 9.0, "aten::mkldnn_convolution"),
        ev("t", 11.0, 12.0, "aten::relu"),
    ]
    found = attribute(events, (0.0, 14.0), CATEGORISE)
    assert found.by_op[("aten::mkldnn_convolution", "convolution")] == pytest.approx(8.0)
    assert found.by_op[("aten::conv2d", "convolution")] == pytest.approx(2.0)
    assert found.by_category["convolution"] == pytest.approx(10.0)
    assert found.by_category["elementwise / activation"] == pytest.approx(1.0)
    assert found.by_category[IDLE] == pytest.approx(3.0)  # 10-11 and 12-14
    assert sum(found.by_category.values()) == pytest.approx(14.0)


def test_parallel_threads_share_wall_time_instead_of_counting_it_twice() -> None:
    events = [ev("a", 0.0, 4.0, "Conv2D:_MklNativeConv2D"), ev("b", 2.0, 6.0, "x/MatMul:MatMul")]
    found = attribute(events, (0.0, 8.0), CATEGORISE)
    assert found.by_category["convolution"] == pytest.approx(3.0)  # 2 alone + half of 2
    assert found.by_category["matmul / GEMM"] == pytest.approx(3.0)
    assert found.by_category[IDLE] == pytest.approx(2.0)
    assert sum(found.by_category.values()) == pytest.approx(8.0)


def test_one_op_type_in_two_categories_is_two_lines() -> None:
    events = [ev("t", 0.0, 1.0, "Mul", "sgd/Mul_1:Mul"), ev("t", 2.0, 4.0, "Mul", "m/bn/Mul:Mul")]
    found = attribute(events, (0.0, 4.0), CATEGORISE)
    assert found.by_op == {
        ("Mul", "optimizer update"): pytest.approx(1.0),
        ("Mul", "normalisation"): pytest.approx(2.0),
    }


def test_events_outside_the_window_are_clipped() -> None:
    found = attribute([ev("t", -5.0, 5.0, "aten::relu")], (0.0, 10.0), CATEGORISE)
    assert found.by_category["elementwise / activation"] == pytest.approx(5.0)
    assert found.window_s == 10.0


def test_a_phases_ranges_take_the_events_inside_them_and_nothing_between() -> None:
    events = [
        ev("t", 0.0, 2.0, "aten::addmm"),
        ev("t", 3.2, 3.8, "aten::relu"),  # between the ranges: in neither
        ev("u", 2.0, 5.0, "aten::addmm"),  # another thread, across both ranges
        ev("t", 4.0, 5.0, "aten::relu"),
        ev("t", 9.0, 10.0, "aten::relu"),  # after both
    ]
    found = attribute_ranges(events, [(4.0, 6.0), (0.0, 3.0)], CATEGORISE)
    assert found.window_s == pytest.approx(5.0)
    assert found.by_category["matmul / GEMM"] == pytest.approx(3.0 + 0.5)  # 4-5 shared
    assert found.by_category["elementwise / activation"] == pytest.approx(0.5)
    assert found.by_category[IDLE] == pytest.approx(1.0)  # 5-6
    assert sum(found.by_category.values()) == pytest.approx(found.window_s)


def test_a_breakdown_gives_each_phase_per_occurrence() -> None:
    # Two generations: a 2 s prefill and two 1 s decoding steps each, 1 s of loop between.
    events = [ev("t", 0.0, 2.0, "aten::addmm"), ev("t", 7.0, 9.0, "aten::addmm")]
    events += [ev("t", s, s + 1.0, "aten::relu") for s in (3.0, 5.0, 10.0, 12.0)]
    decoding = [(3.0, 4.0), (5.0, 6.0), (10.0, 11.0), (12.0, 13.0)]
    window = Window(0.0, 14.0, {"prefill": [(0.0, 2.0), (7.0, 9.0)], "decode": decoding})
    found = build("test", events, window, 2, CATEGORISE, None)
    assert found.profiled_step_s == pytest.approx(7.0)
    prefill, decode = found.phases["prefill"], found.phases["decode"]
    assert (prefill.occurrences, decode.occurrences) == (2, 4)
    assert prefill.profiled_s == pytest.approx(2.0)
    assert decode.profiled_s == pytest.approx(1.0)  # per decoding step, not per generation
    assert decode.categories == {"elementwise / activation": pytest.approx(1.0)}
    assert decode.top_ops[0].seconds_per_step == pytest.approx(1.0)
    # An adapter's bare (start, end) window, and a record stored before phases, have none.
    assert build("test", events, (0.0, 14.0), 2, CATEGORISE, None).phases == {}
    old = found.model_dump(exclude={"phases"})
    assert Breakdown.model_validate(old).phases == {}


@pytest.mark.parametrize(
    ("text", "category"),
    [
        ("Optimizer.step#SGD.step|aten::mul_", "optimizer update"),
        ("sgd/Mul_108:Mul", "optimizer update"),
        (
            "gradient_tape/m/layer1_0_1_conv_1/convolution/Conv2DBackpropFilter:_MklNativeConv2DBackpropFilter",
            "convolution",
        ),
        ("m/layer1_0_1_bn_1/moments/mean:Mean", "normalisation"),
        ("aten::native_batch_norm", "normalisation"),
        ("aten::addmm", "matmul / GEMM"),
        ("aten::max_pool2d_with_indices", "pooling"),
        ("aten::nll_loss_forward", "loss"),
        ("aten::copy_", "layout / copies"),
        ("aten::_lstm", "recurrent"),
        ("aten::empty", "other ops"),
        ("gloo:all_reduce", "communication"),
        ("DistributedDataParallel.forward|c10d::broadcast_", "communication"),
        ("CollectiveBcastRecvV2", "communication"),
    ],
)
def test_the_default_table(text: str, category: str) -> None:
    assert CATEGORISE(text) == category


@pytest.mark.parametrize("text", ["aten::broadcast_tensors", "m/gpt/BroadcastTo:BroadcastTo"])
def test_a_broadcast_on_one_device_is_not_communication(text: str) -> None:
    assert CATEGORISE(text) != "communication"


def test_user_rules_come_first_and_bad_ones_are_refused(tmp_path: Path) -> None:
    good = tmp_path / "cats.yaml"
    good.write_text("my attention: [softmax, 'bmm']\n")
    mine = Categoriser(load_rules(good))
    assert mine("aten::_softmax") == "my attention"
    bad = tmp_path / "bad.yaml"
    bad.write_text("broken: ['(']\n")
    with pytest.raises(SpecError, match="bad regular expression"):
        load_rules(bad)
    # PyYAML's own message ran to eight lines, the document quoted.
    bad.write_text("not: [valid")
    with pytest.raises(SpecError) as said:
        load_rules(bad)
    assert str(said.value) == (
        f"categories file {bad}: broken YAML at line 1, column 12: expected ',' or ']', "
        "but got '<stream end>'"
    )
    # Kept as written, matched without regard to case: `\S` is not `\s`, `\Z` no error.
    escapes = tmp_path / "escapes.yaml"
    escapes.write_text("glued: ['^aten::\\S+_\\Z']\nMine: ['MyKernel']\n")
    mine = Categoriser(load_rules(escapes))
    assert mine("aten::relu_") == "glued"
    assert mine("aten::relu _") != "glued"
    assert mine("void MyKernel<float>") == "Mine"


@pytest.mark.parametrize(
    "text", ["mirrored/sgd/CollectiveReduceV2:CollectiveReduceV2", "sgd/allreduce/NcclAllReduce"]
)
def test_a_collective_in_an_optimizers_scope_is_communication(text: str) -> None:
    assert CATEGORISE(text) == "communication"


# A compiled XLA program's whole text, as `.compile().as_text()` printed it for a Flax
# training step (tests/data/README.md).
_PROGRAM = (Path(__file__).parent.parent / "data" / "xla-program.txt").read_text()


def test_an_xla_fusion_reads_as_what_it_holds_and_the_functions_that_made_it() -> None:
    from fwbench.explain.hlo import module_name, op_texts

    texts = op_texts(_PROGRAM, ("flax", "optax"))
    # The libraries' functions, outermost first, through every parent frame; of the
    # model's and the step's own (model.py) only the op's own function.
    grad = "UpdateContextManager.__call__.<locals>.update_context_manager_wrapper"
    grad += "/_grad_general.<locals>.grad_wrapper/GradFn.__call__"
    assert texts["ynn_fusion.1"] == f"{grad}/Linear.__call__ | ynn_fusion.1 | fusion dot"
    assert texts["convolution"] == f"{grad}/Conv.__call__ | convolution | convolution"
    assert texts["broadcast_multiply_fusion"].startswith(f"{grad}/M.__call__ | ")
    update = "_check_grads_arg_passed.<locals>._check_grads_wrapper/Optimizer.update"
    assert texts["multiply_add_fusion"] == (
        f"{update}/apply_updates/apply_updates.<locals>.<lambda> | multiply_add_fusion"
        " | fusion broadcast multiply add"
    )
    assert texts["mul.2"].startswith(f"{update}/chain.<locals>.update_fn/")
    assert not any("pure" in text.split(" | ")[0] for text in texts.values())
    assert module_name(_PROGRAM) == "jit_pure"
    # Without the framework's packages named, an op keeps its own function alone.
    assert op_texts(_PROGRAM)["ynn_fusion.1"] == "Linear.__call__ | ynn_fusion.1 | fusion dot"
    categorise = Categoriser()
    # By its name alone a fusion of a dot is "other ops"; by what it holds, a matmul.
    assert categorise("jit_pure | ynn_fusion") == "other ops"
    assert categorise(texts["ynn_fusion.1"]) == "matmul / GEMM"
    assert categorise(texts["convolution"]) == "convolution"
    assert categorise(texts["multiply_add_fusion"]) == "optimizer update"
    assert categorise(texts["mul.2"]) == "optimizer update"  # optax's scale
    assert categorise(texts["broadcast_multiply_fusion"]) == "elementwise / activation"
    # A Keras optimizer's update on JAX; XLA's cast and Keras' convert_to_tensor are
    # no convolution.
    keras = "BaseOptimizer.stateless_apply/BaseOptimizer.apply/SGD.update_step/multiply"
    assert categorise(f"{keras} | mul.1 | multiply") == "optimizer update"
    assert categorise("convert_to_tensor | convert.3 | convert") == "elementwise / activation"
    assert categorise(" | wrapped_reverse | fusion reverse") == "layout / copies"
    # Eager JAX runs a program per primitive, named after it.
    assert categorise("jit_conv_general_dilated | convolution") == "convolution"
    assert categorise("jit_reduce_window_max | reduce-window") == "pooling"
    assert categorise("max_pool/pool | reduce-window.2 | reduce-window") == "pooling"
    # A max pool's gradient, which XLA writes with no frame, by what it computes.
    assert categorise(" | wrapped_reduce-window.6 | fusion reduce-window") == "pooling"
    assert categorise("jit_pure | reverse.3") == "layout / copies"
    # A Gemma model's layers hold no GEMM of their own name.
    norm = "GemmaDecoderBlock.call/RMSNormalization.call/sqrt | add_rsqrt_fusion | fusion"
    assert categorise(norm) == "normalisation"
    assert categorise("sm90_xmma_gemm_f32f32_tn_n_kernel") == "matmul / GEMM"


def test_a_reduce_window_over_one_dimension_reads_as_the_reduction_xla_split() -> None:
    """XLA's CPU backend splits a long reduction (a norm's mean over 64 features) into a
    reduce-window of chunks and a reduce, with no frame: a reduction, not a pooling; a
    window over two dimensions is a pooling's (3x3, stride 2)."""
    from fwbench.explain.hlo import op_texts

    program = """HloModule jit_step, is_scheduled=true

ENTRY %main (p: f32[1,8,64], q: f32[], x: f32[1,16,16,8]) -> (f32[1,8,2], f32[1,8,8,8]) {
  %p = f32[1,8,64]{2,1,0} parameter(0)
  %q = f32[] parameter(1)
  %x = f32[1,16,16,8]{3,2,1,0} parameter(2)
  %reduce-window.9 = f32[1,8,2]{2,1,0} reduce-window(%p, %q), window={size=1x1x32 stride=1x1x32}, to_apply=%region_1.4
  %reduce-window.2 = f32[1,8,8,8]{3,2,1,0} reduce-window(%x, %q), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x0_1x0_0}, to_apply=%region_2.5
  ROOT %tuple = (f32[1,8,2]{2,1,0}, f32[1,8,8,8]{3,2,1,0}) tuple(%reduce-window.9, %reduce-window.2)
}
"""  # noqa: E501 (an XLA program's lines)
    texts = op_texts(program)
    assert texts["reduce-window.9"] == " | reduce-window.9 | reduce"
    assert texts["reduce-window.2"] == " | reduce-window.2 | reduce-window"
    categorise = Categoriser()
    assert categorise(texts["reduce-window.9"]) == "other ops"
    assert categorise(texts["reduce-window.2"]) == "pooling"
