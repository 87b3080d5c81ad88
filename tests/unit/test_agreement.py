"""A converted model's output against its source's (frameworks/agreement.py)."""

from __future__ import annotations

import numpy as np

from fwbench.frameworks.agreement import within


def test_outputs_within_the_tolerance_agree_and_beyond_it_warn() -> None:
    want = np.array([[1.0, -2.0, 4.0]], np.float32)
    assert within(want + 1e-6, want, 1e-4, "PyTorch", "fp32", "the export")["output_check"] == (
        "agrees"
    )
    found = within(want + 0.1, want, 1e-4, "PyTorch", "fp32", "the export")
    assert (
        found["output_check"] == "differs" and "may not be the same model" in found["warnings"][0]
    )


def test_a_nan_in_either_output_fails_the_check_with_a_warning() -> None:
    want = np.array([[1.0, -2.0, 4.0]], np.float32)
    got = want.copy()
    got[0, 1] = np.nan
    found = within(got, want, 1e-4, "PyTorch", "fp32", "the export")
    assert found["output_check"] == "failed"
    assert found["warnings"] == ["the export computed NaN or infinite outputs on the same batch"]
    both = within(got, got, 1e-4, "PyTorch", "fp32", "the export")
    assert "the export and PyTorch computed NaN" in both["warnings"][0]
