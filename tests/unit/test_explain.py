from __future__ import annotations

from pathlib import Path

import pytest

from fwbench.errors import SpecError
from fwbench.explain.categories import IDLE, Categoriser, load_rules
from fwbench.explain.timeline import Event, attribute

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
    ],
)
def test_the_default_table(text: str, category: str) -> None:
    assert CATEGORISE(text) == category


def test_user_rules_come_first_and_bad_ones_are_refused(tmp_path: Path) -> None:
    good = tmp_path / "cats.yaml"
    good.write_text("my attention: [softmax, 'bmm']\n")
    mine = Categoriser(load_rules(good))
    assert mine("aten::_softmax") == "my attention"
    bad = tmp_path / "bad.yaml"
    bad.write_text("broken: ['(']\n")
    with pytest.raises(SpecError, match="bad regular expression"):
        load_rules(bad)
