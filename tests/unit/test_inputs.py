"""A model's input signature (fwbench.catalog.inputs): the canonical text a case holds,
`--input-shape` as a user writes it, and the merge of what a model declares with what
is given: the batch is the leading dimension, open dimensions must be given, fixed ones
kept, and every refusal is one line naming the input and what would work."""

from __future__ import annotations

import pytest

from fwbench.catalog.inputs import (
    BATCH,
    TensorSpec,
    arrays,
    format_signature,
    merge,
    parse_given,
    parse_signature,
)


def test_the_canonical_text_round_trips() -> None:
    text = "x=Bx3x224x224:float32;ids=Bx128:int64<50257"
    found = parse_signature(text)
    assert found == (
        TensorSpec("x", (BATCH, 3, 224, 224), "float32"),
        TensorSpec("ids", (BATCH, 128), "int64", 50257),
    )
    assert format_signature(found) == text


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("x=Bx3x0:float32", "each must be >= 1"),
        ("x=Bx3:complex64", "dtype 'complex64' of x; valid choices"),
        ("x=3xB", "only the leading dimension is the batch"),
        ("x=Bx3;x=Bx4", "input 'x' appears twice"),
        ("x=Bx3:float32<4", "'<N' bounds an integer input"),
        ("Bx3", "is not NAME=SHAPE:DTYPE"),
        ("x=", "is not a shape"),
        ("x=Bx100000x100000", "elements per input"),
    ],
)
def test_a_damaged_signature_is_refused_naming_the_problem(given: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_signature(given)


def test_input_shapes_as_a_user_writes_them() -> None:
    assert parse_given(["1x3x224x224"]) == {None: TensorSpec("input", (1, 3, 224, 224))}
    found = parse_given(["ids=Bx128:int64", "mask=?x128:int64"])
    assert found["ids"].shape == (BATCH, 128) and found["mask"].shape == (BATCH, 128)
    with pytest.raises(ValueError, match="name every input when giving several"):
        parse_given(["1x3", "mask=1x3"])
    with pytest.raises(ValueError, match="given twice"):
        parse_given(["x=1x3", "x=1x4"])


def test_a_declared_open_dimension_is_given_and_a_fixed_one_kept() -> None:
    declared = (TensorSpec("x", (BATCH, 3, None, None)),)
    inputs, batch = merge(declared, parse_given(["Bx3x64x64"]), "net")
    assert format_signature(inputs) == "x=Bx3x64x64:float32" and batch is None
    with pytest.raises(ValueError, match=r"dimensions it leaves open \(Bx3x\?x\?\)"):
        merge(declared, {}, "net")
    # An architecture's usual size fills what nothing gave.
    usual = (TensorSpec("x", (BATCH, 3, 224, 224)),)
    inputs, _ = merge(declared, {}, "net", usual)
    assert inputs[0].shape == (BATCH, 3, 224, 224)
    with pytest.raises(ValueError, match="dimension 2 is fixed at 3, not 4"):
        merge(declared, parse_given(["Bx4x64x64"]), "net")
    with pytest.raises(ValueError, match="has no input 'y'; its inputs: x"):
        merge(declared, parse_given(["y=Bx3x8x8"]), "net")


def test_a_number_in_the_leading_dimension_fixes_the_batch() -> None:
    # A graph exported with a static batch of 1 takes that batch only.
    declared = (TensorSpec("x", (1, 3, 32, 32)),)
    inputs, batch = merge(declared, {}, "net")
    assert inputs[0].shape == (BATCH, 3, 32, 32) and batch == 1
    with pytest.raises(ValueError, match="takes a batch of 1, not 8"):
        merge(declared, parse_given(["8x3x32x32"]), "net")
    # A model that declares nothing takes the given shapes, a number fixing the batch.
    inputs, batch = merge((), parse_given(["4x16"]), "net")
    assert inputs[0].shape == (BATCH, 16) and batch == 4
    with pytest.raises(ValueError, match="does not declare its inputs; give them"):
        merge((), {}, "net")


def test_synthetic_values_are_the_same_for_every_framework_and_within_bounds() -> None:
    signature = parse_signature("x=Bx4:float32;ids=Bx6:int64<7;flag=Bx2:bool")
    first, again = arrays(signature, 3), arrays(signature, 3)
    assert [a.shape for a in first] == [(3, 4), (3, 6), (3, 2)]
    assert all((a == b).all() for a, b in zip(first, again, strict=True))
    assert first[1].dtype.name == "int64" and first[1].min() >= 0 and first[1].max() < 7
    assert first[2].dtype.name == "bool"


def test_every_model_kind_is_a_signature_and_each_framework_takes_the_same_values() -> None:
    import numpy as np

    from fwbench.case import Case
    from fwbench.catalog.models import INPUT_KINDS, get_model
    from fwbench.frameworks.base import synthetic_arrays

    assert INPUT_KINDS["token_pair"].dims() == ("seq_len", "vocab_size")
    assert INPUT_KINDS["image"].dims() == ("input_size",)
    bert = get_model("bert_base")
    assert format_signature(bert.input_signature({"seq_len": 16, "vocab_size": 64})) == (
        "ids=Bx16:int64<64"
    )

    image = Case.build(
        framework="torch", model="resnet18", task="infer", batch_size=2, input_size=32
    )
    ((x, nchw),) = synthetic_arrays(image, image.model_spec)
    ((_, nhwc),) = synthetic_arrays(image, image.model_spec, channels_last=True)
    assert x == TensorSpec("x", (BATCH, 3, 32, 32), "float32")
    assert nchw.shape == (2, 3, 32, 32) and nhwc.shape == (2, 32, 32, 3)
    # One image in either layout: outputs compare across frameworks with shared weights.
    assert np.array_equal(nchw.transpose(0, 2, 3, 1), nhwc)
    ((_, wider),) = synthetic_arrays(image, image.model_spec, batch=4)
    assert wider.shape == (4, 3, 32, 32)

    pair = Case.build(
        framework="tensorflow", model="transformer_base", task="infer", seq_len=8, vocab_size=5
    )
    made = synthetic_arrays(pair, pair.model_spec, index="int32")
    assert [t.name for t, _ in made] == ["source", "target"]
    for _, ids in made:
        assert ids.dtype == np.int32 and ids.shape == (pair.batch_size, 8)
        assert ids.min() >= 0 and ids.max() < 5
    # A layout moves images only: token ids are never transposed.
    assert all(
        np.array_equal(a, b)
        for (_, a), (_, b) in zip(
            made,
            synthetic_arrays(pair, pair.model_spec, index="int32", channels_last=True),
            strict=True,
        )
    )
