"""The same-work check of a user's model sees every output, every element (issue 52,
items 4 and 5): a mismatch in one element of a second output is found and named, a
random model is said to be random, and a model without parameters is the same work."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fwbench.frameworks.base import OutputCheck, output_sample
from fwbench.models.parity import check as check_parity
from fwbench.models.parity import output_check

RNG = np.random.default_rng(7)
LOGITS = RNG.standard_normal((4, 32)).astype(np.float32)
SECOND = RNG.standard_normal((4, 8)).astype(np.float32)


def checked(outputs: dict[str, list[Any]], precision: str = "fp32", whole: bool = True) -> str:
    samples = {name: output_sample(found, again=found) for name, found in outputs.items()}
    found = output_check(samples, precision, outputs if whole else None)
    assert found is not None
    return found


def test_the_same_outputs_within_the_numerics_pass_element_by_element() -> None:
    # fp32 kernels reorder sums: every element a few ulps off.
    noisy = [LOGITS * (1 + 1e-6 * RNG.standard_normal(LOGITS.shape)), SECOND + 1e-7]
    found = checked({"torch": [LOGITS, SECOND], "tensorflow": noisy})
    assert found.startswith("passed: tensorflow, torch agree in every element of 2 outputs")


def test_elements_16_to_31_reversed_in_one_framework_fail_naming_the_worst() -> None:
    """The old check (first 16 values of the first output, its RMS) passed this within 0."""
    reversed_tail = LOGITS.copy()
    reversed_tail[0, 16:32] = reversed_tail[0, 16:32][::-1]
    outputs = {"torch": [LOGITS, SECOND], "tensorflow": [reversed_tail, SECOND]}
    found = checked(outputs)
    assert found.startswith("failed: tensorflow, torch outputs differ: output 1 at [0, ")
    assert "of its 128 elements beyond the tolerance (0.001)" in found
    # Read from the summaries alone, the reversal is invisible: the check says so.
    summary = checked(outputs, whole=False)
    assert summary.startswith("passed") and "of their summaries only" in summary


def test_a_second_output_with_another_activation_fails_naming_it() -> None:
    outputs = {"torch": [LOGITS, np.maximum(SECOND, 0)], "keras-jax": [LOGITS, np.tanh(SECOND)]}
    found = checked(outputs)
    assert found.startswith("failed: keras-jax, torch outputs differ: output 2 at [")


def test_outputs_of_other_shapes_or_counts_fail() -> None:
    assert checked({"a": [LOGITS], "b": [LOGITS, SECOND]}).startswith(
        "failed: a outputs 4x32, b 4x32, 4x8"
    )
    assert checked({"a": [LOGITS], "b": [LOGITS.T]}).startswith("failed: a outputs 4x32, b 32x4")


def test_mixed_precision_is_read_within_its_own_tolerance() -> None:
    rounded = [LOGITS * (1 + 0.01 * RNG.standard_normal(LOGITS.shape))]
    assert checked({"a": [LOGITS], "b": rounded}, "bf16").startswith("passed")
    assert checked({"a": [LOGITS], "b": rounded}, "fp32").startswith("failed")


def test_nan_where_the_other_has_a_number_fails_and_nan_in_both_passes() -> None:
    one = LOGITS.copy()
    one[1, 3] = np.nan
    assert checked({"a": [LOGITS], "b": [one]}).startswith(
        "failed: a, b outputs differ: output 1 at [1, 3]"
    )
    assert checked({"a": [one], "b": [one.copy()]}).startswith("passed")


def test_a_model_whose_outputs_change_on_the_same_inputs_is_random_not_different() -> None:
    samples = {
        "torch": output_sample([LOGITS], again=[LOGITS * 0.5]),
        "tensorflow": output_sample([LOGITS * 2], again=[LOGITS]),
    }
    found = output_check(samples, "fp32", {"torch": [LOGITS], "tensorflow": [LOGITS * 2]})
    assert found is not None and found.startswith("random: tensorflow, torch computed other")
    assert "compared by shape only" in found


def test_the_output_check_keeps_two_steps_and_says_whether_they_agreed() -> None:
    from fwbench.case import Case

    case = Case.build(
        framework="onnxruntime", model="resnet18", task="infer", batch_size=2, input_size=32
    ).model_copy(update={"inputs": "x=Bx4:float32"})
    steady = OutputCheck(case, "classify", np.asarray)
    steady({"b": SECOND, "a": LOGITS})
    assert steady.pending  # a second step is still to be seen
    steady({"b": SECOND, "a": LOGITS})
    assert not steady.pending and steady.sample is not None and not steady.sample["random"]
    assert [a.shape for a in steady.arrays or []] == [(4, 8), (4, 32)]  # every output
    noisy = OutputCheck(case, "classify", np.asarray)
    noisy(LOGITS)
    noisy(LOGITS + 1)
    assert noisy.sample is not None and noisy.sample["random"]


@pytest.mark.parametrize(
    ("counts", "mismatch", "says"),
    [
        ({"torch": 0, "onnxruntime": 0}, False, "differ by 0.00%: same work"),
        ({"torch": 0, "tensorflow": 12}, True, "some none: DIFFERENT WORK"),
        ({"torch": 100, "tensorflow": 101}, False, "differ by 1.00%: same work"),
    ],
)
def test_a_model_without_parameters_counts_none_everywhere_and_is_the_same_work(
    counts: dict[str, int], mismatch: bool, says: str
) -> None:
    parity = check_parity(counts)
    assert parity.mismatch is mismatch
    assert parity.describe().endswith(says)


def test_frameworks_parting_at_a_near_tie_made_the_same_choice_not_different_work() -> None:
    """Issue 53: two frameworks whose greedy tokens part where the top two logits are
    within the numerics' error are said to, with the token and the gap; a parting with a
    clear winner, or without the gaps recorded (results of older versions), still fails."""
    from fwbench.models.parity import token_check

    tokens = {"torch/eager": [5, 9, 2, 7], "keras-jax/jit": [5, 9, 4, 1]}
    near = {"torch/eager": [0.9, 0.4, 2e-4, 0.3], "keras-jax/jit": [0.9, 0.4, 3e-4, 0.5]}
    said = token_check(tokens, near)
    assert said is not None and said.startswith(
        "near-tie: keras-jax/jit, torch/eager generated the same first 2 tokens, then parted "
        "at token 3, where the top two logits were at most 0.0003 of their RMS apart, within "
        "the numerics' tolerance (0.001)"
    ), said
    clear = {"torch/eager": [0.9, 0.4, 0.2, 0.3], "keras-jax/jit": [0.9, 0.4, 0.3, 0.5]}
    assert token_check(tokens, clear) == (
        "failed: keras-jax/jit, torch/eager generated different tokens (the first difference "
        "at token 3; the top two logits there were up to 0.3 of their RMS apart, beyond the "
        "numerics' tolerance (0.001))"
    )
    # One variant near a tie does not excuse another with a clear winner there: a
    # framework computing another model has a small gap of its own often enough.
    one_sided = {"torch/eager": [0.9, 0.4, 0.2, 0.3], "keras-jax/jit": [0.9, 0.4, 2e-4, 0.5]}
    assert str(token_check(tokens, one_sided)).startswith("failed:")
    # Nor does a variant whose gap there is unknown.
    assert str(token_check(tokens, {"keras-jax/jit": near["keras-jax/jit"]})).startswith("failed:")
    # A decoding that made a token its own forward pass ranks clearly below another (a
    # cache holding something else) is named.
    own = {"torch/eager": [0.9, 0.4, 2e-4, 0.3], "keras-jax/jit": [0.9, -0.3, 2e-4, 0.5]}
    assert token_check(tokens, own) == (
        "failed: keras-jax/jit, torch/eager generated different tokens (the first difference "
        "at token 3); keras-jax/jit made token 2 where its own forward pass ranks another "
        "0.3 of their RMS higher"
    )
    assert token_check(tokens) == (
        "failed: keras-jax/jit, torch/eager generated different tokens (the first "
        "difference at token 3)"
    )
    # bf16's tolerance is wider: the same 0.02 gap is a near-tie there, not in fp32.
    bf16 = {"torch/eager": [0.9, 0.4, 0.02, 0.3], "keras-jax/jit": [0.9, 0.4, 0.03, 0.5]}
    assert str(token_check(tokens, bf16, 5e-2)).startswith("near-tie:")
    assert str(token_check(tokens, bf16)).startswith("failed:")
