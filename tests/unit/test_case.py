from __future__ import annotations

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
        ({"model": "resnet19"}, "model: unknown model 'resnet19'; valid choices: efficientnet_b4"),
        ({"mode": "graph"}, "mode: PyTorch has no 'graph' mode; valid choices for torch: eager"),
        ({"task": "trian"}, "task: invalid value 'trian'; valid choices: 'train' or 'infer'"),
        ({"device": "tpu"}, "device: invalid value 'tpu'; valid choices: 'cpu' or 'cuda'"),
        ({"input_size": 16}, "input_size: 16 is too small for resnet18; valid sizes are 32"),
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
