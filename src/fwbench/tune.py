"""`fwbench tune`: each framework's best configuration for one workload on this device.

The search space is every execution mode, precision, layout and thread count that is
valid for the framework on the device (see `search_space`); every candidate is measured
like any case (own worker, adaptive timing) and stored, so a tune run is also a sweep.
The answer puts the best-vs-best verdict next to the default-vs-default one: published
comparisons often differ only in which of the two they report.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fwbench.case import Case, canonical_options, option_values_of
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.catalog.models import INPUT_KINDS, get_model
from fwbench.errors import SpecError
from fwbench.measure.verdicts import Comparison, Verdict, comparison_of
from fwbench.result import Result
from fwbench.tasks.train import TRAIN

# Reduced precision tried by default per device: bf16 runs natively on recent CPUs; fp16
# has fast kernels on GPUs only (on CPUs ask for it with --precision fp16).
DEFAULT_PRECISIONS = {"cpu": ("fp32", "bf16"), "cuda": ("fp32", "tf32", "bf16", "fp16")}


def search_space(
    frameworks: Sequence[str],
    workload: dict[str, Any],
    modes: Sequence[str] = (),
    precisions: Sequence[str] = (),
    threads: Sequence[int] = (),
    options: Sequence[str] = (),
) -> list[Case]:
    """Every valid candidate: modes x precisions x layouts (image models) x threads x
    autotuning (cuda) x the framework's own settings (each value given explicitly, e.g.
    TensorFlow's oneDNN on and off, but a fixed default as the setting left out:
    option_sets), per framework. Invalid combinations are skipped,
    not errors."""
    _check_options(frameworks, options)
    device = str(workload.get("device", "cpu"))
    spec = get_model(str(workload["model"]))
    layouts: tuple[str | None, ...] = ("channels_first", "channels_last")
    if not INPUT_KINDS[spec.input_kind].images:
        layouts = (None,)
    task = str(workload.get("task") or TRAIN.name)
    for mode in modes:
        if not any(mode in FRAMEWORKS[fw].modes for fw in frameworks):
            valid = sorted({m for fw in frameworks for m in FRAMEWORKS[fw].modes})
            raise SpecError(
                f"--mode: no {', '.join(frameworks)} mode {mode!r}; valid choices: "
                + ", ".join(valid)
            )
    # Each value given, and why no candidate took it: a value every candidate refused
    # is refused in its own words, not dropped from the search without one.
    given: dict[str, set[Any]] = {"--precision": set(precisions), "--threads": set(threads)}
    given["--options"] = {canonical_options(o) for o in options if o != "default"}
    taken: set[tuple[str, Any]] = set()
    refused: dict[tuple[str, Any], str] = {}
    candidates: list[Case] = []
    for fw in frameworks:
        info = FRAMEWORKS[fw]
        fw_modes = [m for m in modes if m in info.modes] if modes else [
            m for m in info.modes if m not in info.slow_modes
        ]  # fmt: skip
        # A setting of some modes only (Flax's state, of jit) is tried in those modes.
        grid = (
            (mode, *rest)
            for mode in fw_modes
            for rest in itertools.product(
                precisions or DEFAULT_PRECISIONS[device],
                layouts,
                threads or (None,),
                (False, True) if device == "cuda" else (False,),
                option_sets(fw, options, task, mode),
            )
        )
        for mode, precision, layout, n, autotune, chosen in grid:
            fields = {**workload, "framework": fw, "mode": mode, "precision": precision}
            fields |= {"layout": layout, "autotune": autotune, "options": chosen}
            if n is not None:
                fields["threads"] = n
            values = {"--precision": precision, "--threads": n, "--options": chosen}
            try:
                case = Case.build(**fields)
            except SpecError as exc:  # e.g. mixed precision with TorchScript
                for flag, value in values.items():
                    refused.setdefault((flag, value), str(exc))
                continue
            taken |= set(values.items())
            if case not in candidates:
                candidates.append(case)
    for flag, asked in given.items():
        for value in sorted(asked, key=str):
            if (flag, value) not in taken:
                why = refused.get((flag, value), "no framework given runs it")
                raise SpecError(f"{flag} {value}: no candidate can take it: {why}")
    if not candidates:
        raise SpecError("tune: no valid configuration to try; widen --mode / --precision")
    return candidates


def _check_options(frameworks: Sequence[str], options: Sequence[str]) -> None:
    """Refuse a setting none of the frameworks has: it would be left out of every
    candidate without a word (as `fwbench run` refuses it, with the valid choices)."""
    known = {s.name: s for fw in frameworks for s in FRAMEWORKS[fw].settings}
    for text in options:
        try:
            names = option_values_of(text)
        except ValueError as exc:
            raise SpecError(f"options: {exc}") from None
        unknown = sorted(set(names) - set(known))
        if unknown:
            valid = ", ".join(
                f"{name}={'/'.join(map(str, s.values))}" for name, s in sorted(known.items())
            )
            raise SpecError(
                f"options: no {', '.join(frameworks)} setting {unknown[0]!r}; valid choices: "
                + (valid or "none (these frameworks have no settings)")
            )


def option_sets(
    framework: str, given: Sequence[str] = (), task: str = TRAIN.name, mode: str | None = None
) -> list[str | None]:
    """The option sets to try: of `given` (`--options`), those whose every setting the
    framework has ('default': none); otherwise every combination of its settings that
    apply to `task` (and to `mode`, where given), each value explicit ("onednn=on",
    "onednn=off") except a setting's fixed default, which is its absence (the default
    case itself, not a twin of it under another name). [None] where nothing applies."""
    settings = tuple(s for s in FRAMEWORKS[framework].settings if s.applies(task, mode))
    if given:
        names = {s.name for s in settings}
        found: list[str | None] = []
        for text in given:
            options = canonical_options(text)
            if set(option_values_of(options)) <= names:
                found.append(options)
        return list(dict.fromkeys(found)) or [None]
    if not settings:
        return [None]
    values = itertools.product(
        *([f"{s.name}={v}" if v != s.default else "" for v in s.values] for s in settings)
    )
    return [",".join(part for part in combo if part) or None for combo in values]


def default_case(framework: str, workload: dict[str, Any]) -> Case:
    """The framework as normally used: its default mode, fp32, native layout."""
    return Case.build(**workload, framework=framework)


@dataclass(frozen=True)
class Choice:
    framework: str
    default: Result | None
    best: Result | None
    tried: int
    failed: int

    def comparison(self) -> Comparison | None:
        """Default against best over their (confirmation) runs, as verdicts read them;
        None where either is missing or the default is the best."""
        if self.best is None or self.default is None or self.best is self.default:
            return None
        if self.best.measurement is None or self.default.measurement is None:
            return None
        default, best = describe(self.default), describe(self.best)
        return comparison_of({default: self.default, best: self.best}, "given", [(default, best)])

    def confirmed(self) -> Verdict | None:
        """Best against default over their (confirmation) runs."""
        found = self.comparison()
        return found.verdict() if found is not None else None

    @property
    def speedup(self) -> float | None:
        """The default's figure over the best's (>= 1 where the best is faster), by the
        values the verdict reads: the verdict's own ratio, turned the default's way."""
        if self.best is None or self.default is None:
            return None
        if self.best.measurement is None or self.default.measurement is None:
            return None
        found = self.comparison()
        if found is None:
            return 1.0  # the default is the best
        (ratio,) = found.ratios()
        return ratio.value


@dataclass(frozen=True)
class TuneOutcome:
    choices: list[Choice]
    best_vs_best: Verdict | None
    default_vs_default: Verdict | None
    screened: int = 0  # candidates measured (one run each) before the confirmation


def _fastest(results: Sequence[Result]) -> Result | None:
    """The fastest of measured results, by the values their verdicts read."""
    by_key = {r.case_key: r for r in results if r.measurement is not None}
    ranked = comparison_of(by_key).ranked()
    return by_key[ranked[0].name] if ranked else None


def describe(r: Result) -> str:
    c = r.case
    parts = [c.variant, c.precision or "fp32", f"t{c.threads}"]
    return " ".join(parts)


def choose(
    frameworks: Iterable[str], results: Sequence[Result], defaults: dict[str, Case]
) -> TuneOutcome:
    """Each framework's best and default among `results`, and the verdicts between the
    frameworks' bests and between their defaults, all read by the comparison's
    estimator (Result.reading)."""
    by_key = {r.case_key: r for r in results}
    choices = []
    for fw in frameworks:
        mine = [r for r in results if r.case.framework == fw]
        ok = [r for r in mine if r.status == "ok" and r.measurement is not None]
        default = by_key.get(defaults[fw].key())
        choices.append(Choice(fw, default, _fastest(ok), len(mine), len(mine) - len(ok)))
    return TuneOutcome(
        choices,
        _fastest_two([c.best for c in choices]),
        _fastest_two([c.default for c in choices]),
    )


def _fastest_two(results: list[Result | None]) -> Verdict | None:
    """The fastest framework's result against the runner-up's."""
    ok = {describe(r): r for r in results if r is not None and r.measurement is not None}
    return comparison_of(ok).verdict()
