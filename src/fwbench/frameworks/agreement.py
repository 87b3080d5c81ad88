"""A converted model's output against its source framework's, on the same batch.

ONNX Runtime and OpenVINO run a graph exported from PyTorch, LiteRT one converted from
TensorFlow: each worker checks, once, that the converted model computes what its source
does, within the tolerance of the numerics it runs in. The check and its wording are one
for every runtime, so results compare across them.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def within(
    got: np.ndarray, want: np.ndarray, tolerance: float, source: str, numerics: str, what: str
) -> dict[str, Any]:
    """The settings a result records: the largest error, relative to the largest output
    of `source`, against `tolerance`; a warning where it is exceeded (`what` names the
    converted model: "the export", "the converted model")."""
    if got.shape != want.shape:
        return {
            "output_check": "failed",
            "warnings": [f"output shape {got.shape} differs from {source}'s {want.shape}"],
        }
    nans = [name for name, a in ((what, got), (source, want)) if not np.isfinite(a).all()]
    if nans:
        # A NaN compares false both ways: without this it would pass no test and warn of
        # nothing.
        return {
            "output_check": "failed",
            "warnings": [
                f"{' and '.join(nans)} computed NaN or infinite outputs on the same batch"
            ],
        }
    abs_err = float(np.max(np.abs(got - want))) if want.size else 0.0
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    rel_err = abs_err / scale if scale > 0 else abs_err
    found: dict[str, Any] = {
        "output_max_abs_error": abs_err,
        "output_max_rel_error": rel_err,
        "output_tolerance": tolerance,
        "output_check": "agrees" if rel_err <= tolerance else "differs",
    }
    if rel_err > tolerance:
        found["warnings"] = [
            f"outputs differ from {source}'s on the same batch: max error {rel_err:.2g} of "
            f"the largest output (tolerance {tolerance:g} in {numerics}): {what} may not be "
            "the same model"
        ]
    return found
