"""Do two frameworks' versions of a model do the same work? Compare parameter counts.

Standard implementations agree at their default input size but can diverge away from it
(torchvision's VGG pools adaptively to 7x7, keras.applications flattens whatever is
left), so the check is made at each case's own input size and class count.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

TOLERANCE = 0.02


class Parity(BaseModel):
    model_config = ConfigDict(frozen=True)

    counts: dict[str, int]  # framework -> trainable parameters
    max_rel_diff: float | None  # (largest - smallest) / smallest; None with one framework
    mismatch: bool

    def describe(self) -> str:
        counts = ", ".join(f"{fw} {n:,}" for fw, n in sorted(self.counts.items()))
        if self.max_rel_diff is None:
            return f"parameters: {counts} (no other framework to compare)"
        verdict = "DIFFERENT WORK" if self.mismatch else "same work"
        return f"parameters: {counts}, differ by {self.max_rel_diff:.2%}: {verdict}"


def check(counts: dict[str, int], tolerance: float = TOLERANCE) -> Parity:
    """Whether the frameworks' counts (framework -> count) agree within `tolerance`."""
    if len(counts) < 2:
        return Parity(counts=counts, max_rel_diff=None, mismatch=False)
    low, high = min(counts.values()), max(counts.values())
    diff = (high - low) / low if low > 0 else float("inf")
    return Parity(counts=counts, max_rel_diff=diff, mismatch=diff > tolerance)


def token_check(tokens: dict[str, list[int]]) -> str | None:
    """Whether variants that generated from the same weights and prompt made the same
    greedy tokens (fwbench.frameworks.generation: each records its first sequence's):
    "passed: ..." or "failed: ..." (a different model, or numerics far enough apart to
    change a token), as a result's `settings.token_check`; None with one variant."""
    if len(tokens) < 2:
        return None
    distinct = {tuple(t) for t in tokens.values()}
    names = ", ".join(sorted(tokens))
    if len(distinct) == 1:
        return f"passed: {names} generated the same {len(next(iter(distinct)))} tokens"
    first = min(
        next((i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b), min(len(x), len(y)))
        for x in distinct
        for y in distinct
        if x != y
    )
    return f"failed: {names} generated different tokens (the first difference at token {first + 1})"


# How far one framework's output of a user's model may be from another's, as a share of
# the output's root mean square: fp32 kernels reorder sums; a wrong model is off by far
# more. Mixed precision keeps 8 (bf16) or 11 (fp16) bits of mantissa.
OUTPUT_TOLERANCE = {"fp32": 1e-3, "tf32": 1e-2, "bf16": 5e-2, "fp16": 2e-2}


def output_check(samples: dict[str, dict[str, Any]], precision: str = "fp32") -> str | None:
    """Whether variants that ran the same user's model on the same inputs (the same seed
    in every framework) computed the same first output (fwbench.frameworks.base.
    output_sample: its shape, its first values and its root mean square): "passed: ..."
    or "failed: ...", as a result's `settings.output_agreement`; None with one variant."""
    if len(samples) < 2:
        return None
    tolerance = OUTPUT_TOLERANCE.get(precision, 5e-2)
    names = sorted(samples)
    first = samples[names[0]]
    worst = 0.0
    for name in names[1:]:
        other = samples[name]
        if other["shape"] != first["shape"]:
            return f"failed: {names[0]} output {first['shape']}, {name} {other['shape']}"
        scale = max(first["rms"], other["rms"], 1e-12)
        diffs = [abs(a - b) for a, b in zip(first["values"], other["values"], strict=False)]
        diffs.append(abs(first["rms"] - other["rms"]))
        worst = max(worst, max(diffs) / scale)
    verdict = "passed" if worst <= tolerance else "failed"
    return (
        f"{verdict}: {', '.join(names)} outputs agree within {worst:.1e} of their scale "
        f"(tolerance {tolerance:g})"
        if verdict == "passed"
        else f"failed: {', '.join(names)} outputs differ by {worst:.1e} of their scale "
        f"(tolerance {tolerance:g})"
    )
