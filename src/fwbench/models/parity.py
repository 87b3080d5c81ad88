"""Do two frameworks' versions of a model do the same work? Compare parameter counts.

Standard implementations agree at their default input size but can diverge away from it
(torchvision's VGG pools adaptively to 7x7, keras.applications flattens whatever is
left), so the check is made at each case's own input size and class count.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

TOLERANCE = 0.02


class Parity(BaseModel):
    # "some none" is an infinite difference: stored as JSON text, kept as Infinity (the
    # default writes null, which reads as "no other framework to compare").
    model_config = ConfigDict(frozen=True, ser_json_inf_nan="constants")

    counts: dict[str, int]  # framework -> trainable parameters
    max_rel_diff: float | None  # (largest - smallest) / smallest; None with one framework
    mismatch: bool

    def describe(self) -> str:
        counts = ", ".join(f"{fw} {n:,}" for fw, n in sorted(self.counts.items()))
        if self.max_rel_diff is None:
            return f"parameters: {counts} (no other framework to compare)"
        verdict = "DIFFERENT WORK" if self.mismatch else "same work"
        if self.max_rel_diff == float("inf"):
            return f"parameters: {counts}, some none: {verdict}"
        return f"parameters: {counts}, differ by {self.max_rel_diff:.2%}: {verdict}"


def check(counts: dict[str, int], tolerance: float = TOLERANCE) -> Parity:
    """Whether the frameworks' counts (framework -> count) agree within `tolerance`."""
    if len(counts) < 2:
        return Parity(counts=counts, max_rel_diff=None, mismatch=False)
    low, high = min(counts.values()), max(counts.values())
    # A model without trainable parameters (a parameter-free graph) counts none in every
    # framework: the same work.
    diff = (high - low) / low if low > 0 else (0.0 if high == 0 else float("inf"))
    return Parity(counts=counts, max_rel_diff=diff, mismatch=diff > tolerance)


def token_check(
    tokens: dict[str, list[int]],
    margins: Mapping[str, list[float]] | None = None,
    tolerance: float | None = None,
) -> str | None:
    """Whether variants that generated from the same weights and prompt made the same
    greedy tokens (fwbench.frameworks.generation: each records its first sequence's):
    "passed: ...", "failed: ..." (a different model, or numerics far enough apart to
    change a token) or "near-tie: ...", as a result's `settings.token_check`; None with
    one variant.

    `margins` holds, by variant, each made token's logit less the highest other one, as
    a share of the logits' root mean square (GenerateWorkload.generated: the top two's
    gap, negative where the decoding did not choose its own forward pass's argmax).
    Where two sequences part at a token whose gap is within `tolerance` (the numerics'
    own error, OUTPUT_TOLERANCE by default) in every variant that made either, the
    frameworks made the same model's choice between two near-equal tokens: a near-tie,
    said with its token and widest gap, not different work. Every variant must be near
    the tie: one that computes another model is as likely as not to have a small gap of
    its own there. The tokens after the parting follow from another context and are
    not compared."""
    if len(tokens) < 2:
        return None
    given = margins or {}
    distinct = {tuple(t) for t in tokens.values()}
    names = ", ".join(sorted(tokens))
    if len(distinct) == 1:
        return f"passed: {names} generated the same {len(next(iter(distinct)))} tokens"
    limit = OUTPUT_TOLERANCE["fp32"] if tolerance is None else tolerance
    partings: list[tuple[int, float | None]] = []
    for x in distinct:
        for y in distinct:
            if x >= y:
                continue
            at = next(
                (i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b),
                min(len(x), len(y)),
            )
            sides = [v for v, t in tokens.items() if tuple(t) in (x, y)]
            gaps = [given[v][at] for v in sides if at < len(given.get(v, []))]
            # A variant without its gap there leaves the parting unjudged.
            widest = max(abs(g) for g in gaps) if len(gaps) == len(sides) else None
            partings.append((at, widest))
    at, gap = min(partings, key=lambda p: p[0])
    # A decoding that chose, before or at the parting, a token its own forward pass ranks
    # clearly below another computes something else than its model (a cache holding
    # other values): never a near-tie.
    own = [
        f"{v} made token {i + 1} where its own forward pass ranks another "
        f"{-g:.2g} of their RMS higher"
        for v, gaps_of in sorted(given.items())
        if v in tokens
        for i, g in enumerate(gaps_of[: at + 1])
        if g < -limit
    ][:1]
    if not own and all(g is not None and g <= limit for _, g in partings):
        return (
            f"near-tie: {names} generated the same first {at} tokens, then parted at token "
            f"{at + 1}, where the top two logits were at most {gap:.2g} of their RMS apart, "
            f"within the numerics' tolerance ({limit:g}): the same model's choice between "
            "two near-equal tokens, not different work"
        )
    said = (
        f"; the top two logits there were up to {gap:.2g} of their RMS apart, beyond the "
        f"numerics' tolerance ({limit:g})"
        if gap is not None and gap > limit
        else ""
    )
    return (
        f"failed: {names} generated different tokens (the first difference at token {at + 1}{said})"
        + "".join(f"; {o}" for o in own)
    )


# How far one framework's output of a user's model may be from another's, element by
# element, as `numpy.testing.assert_allclose` reads a tolerance: relative to the element,
# and absolute as a share of the output's root mean square (an element near zero has no
# scale of its own). fp32 kernels reorder sums; a wrong model is off by far more. Mixed
# precision keeps 8 (bf16) or 11 (fp16) bits of mantissa.
OUTPUT_TOLERANCE = {"fp32": 1e-3, "tf32": 1e-2, "bf16": 5e-2, "fp16": 2e-2}


def output_check(
    samples: dict[str, dict[str, Any]],
    precision: str = "fp32",
    arrays: Mapping[str, list[Any] | None] | None = None,
) -> str | None:
    """Whether variants that ran the same user's model on the same inputs (the same seed
    in every framework) computed the same thing: "passed: ...", "failed: ..." or
    "random: ...", as a result's `settings.output_agreement`; None with one variant.

    `arrays` holds each variant's outputs, whole (fwbench.launch.outputs): every output,
    every element is compared, and a failure names the worst element. A variant without
    them (measured on another machine, or too large to write) is compared by its summary
    (fwbench.frameworks.base.output_sample: the first output's first values, each
    output's shape and root mean square), and the check says so. A model whose outputs
    changed between two steps on the same inputs (dropout left on, a random op) is
    compared by shape only: "random", not different work."""
    if len(samples) < 2:
        return None
    tolerance = OUTPUT_TOLERANCE.get(precision, 5e-2)
    names = sorted(samples)
    shapes = {n: _shapes(samples[n]) for n in names}
    first = names[0]
    for name in names[1:]:
        if shapes[name] != shapes[first]:
            return f"failed: {first} outputs {_said(shapes[first])}, {name} {_said(shapes[name])}"
    random = [n for n in names if samples[n].get("random")]
    if random:
        return (
            f"random: {', '.join(random)} computed other outputs in two steps on the same "
            "inputs (dropout left on, or a random operation): compared by shape only, "
            f"the same in {', '.join(names)}"
        )
    whole = {n: (arrays or {}).get(n) for n in names}
    if all(found is not None for found in whole.values()):
        return _elementwise(names, whole, tolerance)  # type: ignore[arg-type]
    return _summaries(names, samples, tolerance)


def _shapes(sample: dict[str, Any]) -> list[list[int]]:
    outputs = sample.get("outputs")
    return [list(o["shape"]) for o in outputs] if outputs else [list(sample["shape"])]


def _said(shapes: list[list[int]]) -> str:
    return ", ".join("x".join(map(str, s)) or "scalar" for s in shapes)


def _elementwise(names: list[str], whole: dict[str, list[Any]], tolerance: float) -> str:
    import numpy as np

    first = names[0]
    worst, where = 0.0, ""
    for index, want in enumerate(whole[first]):
        want64 = np.asarray(want, dtype=np.float64)
        finite = want64[np.isfinite(want64)]
        scale = float(np.sqrt(np.mean(finite * finite))) if finite.size else 0.0
        for name in names[1:]:
            got = np.asarray(whole[name][index], dtype=np.float64)
            if not want64.size:
                continue
            # The error as a share of what is allowed at each element: > 1 fails.
            allowed = tolerance * (np.abs(want64) + max(scale, 1e-12))
            share = np.abs(got - want64) / allowed
            same = (got == want64) | (np.isnan(got) & np.isnan(want64))
            share = np.where(same, 0.0, share)
            share = np.where(np.isnan(share), np.inf, share)
            at = int(np.argmax(share))
            if float(share.flat[at]) > worst or not where:
                worst = float(share.flat[at])
                position = tuple(int(i) for i in np.unravel_index(at, want64.shape))
                beyond = int(np.count_nonzero(share > 1))
                where = (
                    f"output {index + 1} at {list(position)}: {name} {got.flat[at]:.6g}, "
                    f"{first} {want64.flat[at]:.6g}; {beyond:,} of its {want64.size:,} "
                    "elements beyond the tolerance"
                )
    outputs = len(whole[first])
    if worst <= 1:
        return (
            f"passed: {', '.join(names)} agree in every element of {outputs} output"
            f"{'s' if outputs != 1 else ''}, within {worst * tolerance:.1e} of "
            f"their scale (tolerance {tolerance:g})"
        )
    return f"failed: {', '.join(names)} outputs differ: {where} ({tolerance:g})"


def _summaries(names: list[str], samples: dict[str, dict[str, Any]], tolerance: float) -> str:
    """The check of old records, and of variants whose outputs were not written here."""
    first = samples[names[0]]
    worst = 0.0
    for name in names[1:]:
        other = samples[name]
        scale = max(first["rms"], other["rms"], 1e-12)
        diffs = [abs(a - b) for a, b in zip(first["values"], other["values"], strict=False)]
        diffs.append(abs(first["rms"] - other["rms"]))
        for a, b in zip(first.get("outputs", []), other.get("outputs", []), strict=False):
            diffs.append(abs(a["rms"] - b["rms"]) * scale / max(a["rms"], b["rms"], 1e-12))
        worst = max(worst, max(diffs) / scale)
    said = "of their summaries only (the first output's first values, each one's scale)"
    if worst <= tolerance:
        return (
            f"passed: {', '.join(names)} outputs agree within {worst:.1e} of their scale "
            f"(tolerance {tolerance:g}), {said}"
        )
    return (
        f"failed: {', '.join(names)} outputs differ by {worst:.1e} of their scale "
        f"(tolerance {tolerance:g}), {said}"
    )
