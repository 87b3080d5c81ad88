"""A study's claims (one YAML file per study in this package) evaluated on results.

Each claim names the cases it is about (`where`: case fields and their allowed values)
and what it says:
  faster            `a` is faster than `b` along `axis` (framework, mode, model, strategy,
                    autotune, ...), every other case field equal; with `published_ratio`,
                    the published speed-up is set beside each pair's interval;
  same              `a` and `b` are equivalent within `band` (default the verdicts' ±2%);
  falls_with_batch  inference time per sample falls as the batch grows (Figure 4's trend
                    test over run-level values);
  flat_with_batch   average power does not change beyond `band` across batch sizes;
  scales_near_linearly
                    the scaling efficiency of N replicas against 1 of the same strategy
                    and workload (fwbench.studies.trends) is at least `threshold`.
Pairs are judged with the verdicts every report uses (an interval over runs, three
outcomes, the band the results were recorded under unless the claim sets its own), so a
claim "agrees" only where a rerun would agree too. `where_a` and `where_b` hold what one
side alone must be (e.g. Keras on JAX jit-compiled against PyTorch eager); each side's
other fields must be equal, and a side measured more than one way (two modes, say)
pairs each way with each way of the other. `most: true` reads a claim made "for most
networks": more than half of its pairs must agree, not all.

A claim's outcome here: agrees, disagrees, inconclusive, or not measured here (no result
matches: e.g. a GPU claim on a CPU-only machine, or power without an energy counter).
Where fwbench can see why a pair disagrees (the two sides did different work), it says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fwbench.case import Case
from fwbench.catalog.strategies import get_strategy
from fwbench.errors import SpecError
from fwbench.measure.verdicts import DEFAULT_BAND, Verdict, comparison_of
from fwbench.result import Result
from fwbench.studies import studies
from fwbench.studies.trends import downward_trend, efficiency

Outcome = Literal["agrees", "disagrees", "inconclusive", "not measured here"]
OUTCOMES: tuple[str, ...] = ("agrees", "disagrees", "inconclusive", "not measured here")
# Case fields that say how, not what: a framework comparison pairs each framework in its
# own mode (as the studies ran them; where_a and where_b name which).
_FRAMEWORK_OWN = frozenset({"mode", "layout"})


class Claim(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    published: str
    kind: Literal["faster", "same", "falls_with_batch", "flat_with_batch", "scales_near_linearly"]
    where: dict[str, Any] = Field(default_factory=dict)
    axis: str | None = None
    a: Any = None
    b: Any = None
    where_a: dict[str, Any] = Field(default_factory=dict)  # what side a alone must be
    where_b: dict[str, Any] = Field(default_factory=dict)
    most: bool = False  # more than half of the pairs must agree, not every one
    # None: the band the results were recorded under (as every other view reads them).
    band: float | None = Field(None, gt=0, lt=1)
    threshold: float = Field(0.90, gt=0, le=1)  # scales_near_linearly: least efficiency
    # faster: how many times faster `a` was in the published figures (b's time over a's),
    # set beside each pair's interval here: a claim can agree in direction while its
    # size has moved.
    published_ratio: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _known_fields(self) -> Claim:
        # A misspelt field would make the claim "not measured here" for ever.
        fields = set(Case.model_fields)
        for where in (self.where, self.where_a, self.where_b):
            unknown = sorted(set(where) - fields)
            if unknown:
                raise ValueError(
                    f"claim {self.id}: no case field {', '.join(unknown)}; "
                    f"valid choices: {', '.join(sorted(fields))}"
                )
        if self.axis is not None and self.axis not in fields:
            raise ValueError(f"claim {self.id}: no case field {self.axis} to compare along")
        return self

    def matches(self, r: Result) -> bool:
        return _within(self.where, r.case.model_dump())

    def side(self, case: dict[str, Any]) -> str | None:
        """Which side of the claim a case is on ("a", "b"), or None."""
        value = case.get(str(self.axis))
        if value == self.a and _within(self.where_a, case):
            return "a"
        if value == self.b and _within(self.where_b, case):
            return "b"
        return None


def _within(where: dict[str, Any], case: dict[str, Any]) -> bool:
    for field, wanted in where.items():
        allowed = wanted if isinstance(wanted, list) else [wanted]
        if case.get(field) not in allowed:
            return False
    return True


class Study(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    study: str
    title: str
    claims: list[Claim]


@dataclass(frozen=True)
class Finding:
    claim: Claim
    outcome: Outcome
    here: str  # what the results say, with verdicts and intervals
    reason: str = ""  # why it disagrees or was not measured, where fwbench can see it


def load_study(name: str) -> Study:
    if name not in studies():
        raise SpecError(f"unknown study {name!r}; valid choices: {', '.join(studies())}")
    text = resources.files("fwbench.studies").joinpath(f"{name}.yaml").read_text()
    try:
        return Study.model_validate(yaml.safe_load(text))
    except ValidationError as exc:  # a packaging error, but still one line
        raise SpecError(f"study {name}: {exc.errors()[0]['msg']}") from None


def evaluate(study: Study, results: Sequence[Result]) -> list[Finding]:
    return [evaluate_claim(c, results) for c in study.claims]


def evaluate_claim(claim: Claim, results: Sequence[Result]) -> Finding:
    matching = _latest([r for r in results if claim.matches(r)])
    if not matching:
        return Finding(claim, "not measured here", "-", f"no result matches {_where(claim)}")
    if claim.kind == "scales_near_linearly":
        return _scaling(claim, matching)
    measured = [r for r in matching if r.measurement is not None]
    if not measured:
        statuses = sorted({r.status for r in matching})
        return Finding(
            claim, "not measured here", "-", f"every matching case ended {'/'.join(statuses)}"
        )
    if claim.kind in ("faster", "same"):
        # Failed cases pair too: a side that failed where the other ran decides nothing.
        return _pairs(claim, matching)
    if claim.kind == "falls_with_batch":
        return _trend(claim, measured)
    return _power(claim, measured)


def _latest(results: Sequence[Result]) -> list[Result]:
    by_key: dict[str, Result] = {}
    for r in results:
        by_key[r.case_key] = r  # results come oldest first: a later one wins
    return list(by_key.values())


def _where(claim: Claim) -> str:
    parts = [
        f"{k} {'/'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in claim.where.items()
    ]
    if claim.axis:
        parts.append(
            f"{claim.axis} {_side(claim.a, claim.where_a)} and {_side(claim.b, claim.where_b)}"
        )
    return ", ".join(parts) or "anything"


def _side(value: Any, where: dict[str, Any]) -> str:
    alone = " ".join(
        f"{k} {'/'.join(map(str, v)) if isinstance(v, list) else v}" for k, v in where.items()
    )
    return f"{value} ({alone})" if alone else str(value)


def _label(a: Result, b: Result, axis: str) -> str:
    c = a.case
    text = f"{c.model} {c.task} b{c.batch_size} {c.shape}"
    if c.precision:
        text += f" {c.precision}"
    if axis == "framework":
        return text + f" ({a.case.mode} vs {b.case.mode})"
    return text + f" ({c.framework} {c.mode})" if axis != "mode" else text + f" ({c.framework})"


def _pairs(claim: Claim, results: list[Result]) -> Finding:
    axis = str(claim.axis)
    ignore = {axis} | (_FRAMEWORK_OWN if axis == "framework" else set())
    sides: dict[tuple[Any, ...], dict[str, list[Result]]] = {}
    for r in results:
        case = r.case.model_dump()
        side = claim.side(case)
        if side is None:
            continue
        # Off the CPU a run's threads are the host's, not the work's: pairs may differ
        # in them. On the CPU they are the work's, so only equal threads pair.
        skip = ignore | ({"threads"} if r.case.device != "cpu" else set())
        key = tuple(sorted((k, str(v)) for k, v in case.items() if k not in skip))
        sides.setdefault(key, {}).setdefault(side, []).append(r)
    pairs = [(a, b) for s in sides.values() for a in s.get("a", []) for b in s.get("b", [])]
    if not pairs:
        return Finding(claim, "not measured here", "-", f"no pair of {_where(claim)}")
    agree: list[str] = []
    disagree: list[str] = []
    unsure: list[str] = []
    different: dict[str, str] = {}
    unmeasured: list[str] = []
    for a, b in pairs:
        failed = [r for r in (a, b) if r.measurement is None]
        if failed:
            # A side that ended oom or error where the other ran cannot be called faster
            # or the same: that pair is undecided, never left out (a claim that PyTorch
            # is faster agreed on the one network where both ran).
            ended = ", ".join(f"{r.case.framework}/{r.case.mode} ended {r.status}" for r in failed)
            what = f"{_label(a, b, axis)}: {ended}"
            if len(failed) == 1:
                unsure.append(what)
            unmeasured.append(what)
            continue
        assert a.measurement is not None and b.measurement is not None
        if a.different_work or b.different_work:
            # Not the same model in the two: neither for nor against the claim.
            why = a.different_work_reason or b.different_work_reason or "different work"
            different.setdefault(f"{a.case.model} at {a.case.shape}", why)
            continue
        pair = [(str(claim.a), str(claim.b))]
        v = comparison_of({str(claim.a): a, str(claim.b): b}, "given", pair, claim.band).verdict()
        assert v is not None
        text = f"{_label(a, b, axis)}: {v.text()}" + _beside_published(claim, v)
        if claim.kind == "faster":
            ok = v.outcome == "faster" and v.faster == str(claim.a)
            bad = v.outcome == "equivalent" or (v.outcome == "faster" and v.faster != str(claim.a))
        else:
            ok, bad = v.outcome == "equivalent", v.outcome == "faster"
        (agree if ok else disagree if bad else unsure).append(text)
    reason = "; ".join(
        [
            *(
                f"{what} is different work in the two ({why}): left out"
                for what, why in different.items()
            ),
            *(f"{what}: not decided" for what in unmeasured),
        ]
    )
    n = len(agree) + len(disagree) + len(unsure)
    if n == 0:
        found = "no pair does the same work" if different else "no pair was measured on both sides"
        return Finding(claim, "inconclusive", found, reason)
    outcome = _counted(claim, len(agree), len(unsure), n)
    shown = {"disagrees": disagree, "inconclusive": unsure}.get(outcome, agree)
    if not shown:  # "most" can be decided while some disagree or are unsure
        shown = agree or disagree or unsure
    summary = f"{len(agree)} of {n} agree, {len(disagree)} disagree, {len(unsure)} inconclusive"
    if claim.most:
        summary += f" (more than half must agree: {n // 2 + 1})"
    here = summary + "; " + "; ".join(shown[:3]) + ("; ..." if len(shown) > 3 else "")
    return Finding(claim, outcome, here, reason)


def _counted(claim: Claim, agree: int, unsure: int, n: int) -> Outcome:
    """A claim about every pair (or, with `most`, more than half of them): it agrees
    once enough pairs agree, disagrees once they could not even if every inconclusive
    pair agreed, and is inconclusive between."""
    needed = n // 2 + 1 if claim.most else n
    if agree >= needed:
        return "agrees"
    return "disagrees" if agree + unsure < needed else "inconclusive"


def _beside_published(claim: Claim, v: Verdict) -> str:
    """The published ratio (a faster than b by that much) against this pair's interval of
    the same ratio: inside it, or which way it lies outside."""
    if claim.published_ratio is None:
        return ""
    published = claim.published_ratio
    head = f"; published {claim.a} {published:.2f}x faster"
    if v.rules_out() is None:  # no interval to set it beside
        return head
    # This pair's a-over-b speed-up and its interval, whichever side won.
    if v.faster == str(claim.a):
        low, high = v.ci_low, v.ci_high
    else:
        low, high = 1.0 / v.ci_high, 1.0 / v.ci_low
    if low <= published <= high:
        return head + ": inside this interval"
    return head + (": above this interval" if published > high else ": below this interval")


def _trend(claim: Claim, results: list[Result]) -> Finding:
    curves: dict[tuple[Any, ...], dict[int, Result]] = {}
    for r in results:
        curves.setdefault(_curve(r), {})[r.case.batch_size] = r
    agree: list[str] = []
    disagree: list[str] = []
    unsure: list[str] = []
    for by_batch in curves.values():
        if len(by_batch) < 2:
            continue
        batches = sorted(by_batch)
        per_sample = [
            [m / b for m in by_batch[b].measurement.per_run()]  # type: ignore[union-attr]
            for b in batches
        ]
        trend = downward_trend(batches, per_sample)
        if trend is None:
            continue
        text = f"{_curve_label(by_batch)}: rho {trend.rho:.2f}, p {trend.p_value:.2g}"
        if trend.p_value < 0.05 and trend.rho < 0:
            agree.append(text)
        elif trend.rho > 0:
            up = downward_trend(batches, [[-x for x in xs] for xs in per_sample])
            (disagree if up is not None and up.p_value < 0.05 else unsure).append(text)
        else:
            unsure.append(text)
    n = len(agree) + len(disagree) + len(unsure)
    if n == 0:
        return Finding(claim, "not measured here", "-", "no curve with two or more batch sizes")
    outcome: Outcome = "disagrees" if disagree else "inconclusive" if unsure else "agrees"
    shown = disagree or unsure or agree
    here = (
        f"{len(agree)} of {n} curves fall significantly, {len(disagree)} rise; "
        + "; ".join(shown[:3])
        + ("; ..." if len(shown) > 3 else "")
    )
    return Finding(claim, outcome, here)


def _power(claim: Claim, results: list[Result]) -> Finding:
    measured = [r for r in results if r.energy and r.energy.average_power_w]
    if not measured:
        reasons = sorted({r.energy.reason for r in results if r.energy and r.energy.reason})
        why = reasons[0] if reasons else "no energy counter"
        return Finding(claim, "not measured here", "-", f"power not measured: {why}")
    curves: dict[tuple[Any, ...], dict[int, Result]] = {}
    for r in measured:
        curves.setdefault(_curve(r), {})[r.case.batch_size] = r
    band = claim.band or DEFAULT_BAND
    flat: list[str] = []
    varies: list[str] = []
    for by_batch in curves.values():
        if len(by_batch) < 2:
            continue
        watts = [float(r.energy.average_power_w) for r in by_batch.values()]  # type: ignore[union-attr,arg-type]
        low, high = min(watts), max(watts)
        text = f"{_curve_label(by_batch)}: {low:.0f}-{high:.0f} W"
        (flat if high / low <= 1 + band else varies).append(text)
    if not flat and not varies:
        return Finding(claim, "not measured here", "-", "no curve with two or more batch sizes")
    # One power reading per case, without an interval: within the band is "agrees",
    # beyond it "disagrees".
    outcome: Outcome = "disagrees" if varies else "agrees"
    shown = varies or flat
    return Finding(claim, outcome, "; ".join(shown[:3]) + ("; ..." if len(shown) > 3 else ""))


def _curve(r: Result) -> tuple[Any, ...]:
    """The curve a result is a point of: every case field but the batch size, so two
    precisions or thread counts are two curves, never one."""
    case = r.case.model_dump(exclude={"batch_size"})
    return tuple(sorted((k, str(v)) for k, v in case.items()))


def _curve_label(by_batch: dict[int, Result]) -> str:
    c = next(iter(by_batch.values())).case
    text = f"{c.variant} {c.model} {c.shape}"
    if c.precision:
        text += f" {c.precision}"
    return text + (f", {c.threads} threads" if c.device == "cpu" else f" {c.device}")


def _scaling(claim: Claim, results: list[Result]) -> Finding:
    """N replicas against 1 of the same strategy and workload: the efficiency t_1 / t_N
    and its interval over runs (fwbench.studies.trends), against `threshold`."""
    groups: dict[tuple[Any, ...], list[Result]] = {}
    for r in results:
        if r.case.strategy and r.measurement is not None:
            case = r.case.model_dump(exclude={"world_size", "threads"})
            groups.setdefault(tuple(sorted((k, str(v)) for k, v in case.items())), []).append(r)
    pairs: list[tuple[Result, Result]] = []
    for group in groups.values():
        bases = [r for r in group if r.case.replicas == 1]
        for scaled in group:
            base = _baseline(scaled, bases) if scaled.case.replicas > 1 else None
            if base is not None:
                pairs.append((base, scaled))
    if not pairs:
        return Finding(claim, "not measured here", "-", _no_scaling_pair(claim, results))
    agree: list[str] = []
    disagree: list[str] = []
    unsure: list[str] = []
    reasons: dict[str, None] = {}  # ordered, without repeats
    for base, scaled in pairs:
        value, ci = efficiency(base, scaled)
        interval = f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "no interval: one run each"
        c = scaled.case
        threads = (
            f", host threads {base.case.threads} vs {c.threads}/process"
            if base.case.threads != c.threads
            else ""
        )
        text = (
            f"{c.variant} {c.model} b{c.batch_size}/replica {c.shape} {c.device}, "
            f"{c.replicas} vs 1 replica{threads}: efficiency {value:.2f} ({interval})"
        )
        if ci is not None and ci[0] >= claim.threshold:
            agree.append(text)
            continue
        (disagree if ci is not None and ci[1] < claim.threshold else unsure).append(text)
        if why := _shared_host(scaled):
            reasons[why] = None
    n = len(pairs)
    outcome: Outcome = "disagrees" if disagree else "inconclusive" if unsure else "agrees"
    shown = disagree or unsure or agree
    here = (
        f"{len(agree)} of {n} at least {claim.threshold:.0%} efficient, {len(disagree)} "
        f"below, {len(unsure)} inconclusive; "
        + "; ".join(shown[:3])
        + ("; ..." if len(shown) > 3 else "")
    )
    return Finding(claim, outcome, here, "; ".join(reasons))


def _baseline(scaled: Result, bases: list[Result]) -> Result | None:
    """The 1-replica result to scale against: the same threads per process (as the
    scaling table pairs them). On a GPU, threads are the host's and a per-process
    strategy's default splits the cores among its processes, so another baseline of the
    workload stands in (the one with the most threads: the whole host's)."""
    for b in bases:
        if b.case.threads == scaled.case.threads:
            return b
    if scaled.case.device == "cpu":
        return None
    return max(bases, key=lambda b: b.case.threads, default=None)


def _shared_host(r: Result) -> str:
    """Why CPU replicas cannot be expected to scale as devices do, as far as the result
    shows: they are processes on one host, sharing it (and, oversubscribed, its cores)."""
    c = r.case
    if c.device != "cpu":
        return ""
    if r.distributed is not None:
        processes = r.distributed.processes
    else:
        strategy = get_strategy(str(c.strategy))
        processes = strategy.process_count(c.replicas) if strategy else c.replicas
    host = r.environment.get("host")
    cores = host.get("cpu_physical_cores") if isinstance(host, dict) else None
    used = f"{processes} process(es) x {c.threads} thread(s)"
    if isinstance(cores, int) and processes * c.threads > cores:
        return (
            f"the CPU is oversubscribed: {used} on {cores} physical cores, so the "
            f"{c.replicas} replicas share cores"
        )
    on = f" with {cores} physical cores" if isinstance(cores, int) else ""
    return (
        f"on the CPU the {c.replicas} replicas are {used} on one host{on}: they share its "
        "caches and memory bandwidth, and the all-reduce runs on the same cores"
    )


def _no_scaling_pair(claim: Claim, results: list[Result]) -> str:
    """Why no 1-replica result pairs with a larger one: which side is missing (and how
    its cases ended), or which fields differ between the two sides."""
    head = f"no pair of 1 and more replicas of {_where(claim)}"
    runs = [r for r in results if r.case.strategy]
    one = [r.case.model_dump() for r in runs if r.measurement and r.case.replicas == 1]
    more = [r.case.model_dump() for r in runs if r.measurement and r.case.replicas > 1]
    if one and more:
        # Threads must match on the CPU only (_baseline).
        skip = {"world_size"} | ({"threads"} if all(c["device"] != "cpu" for c in more) else set())
        differ = []
        for field in (f for f in one[0] if f not in skip):
            a, b = {str(c[field]) for c in one}, {str(c[field]) for c in more}
            if not a & b:
                differ.append(f"{field} {'/'.join(sorted(a))} vs {'/'.join(sorted(b))}")
        return f"{head}: 1 and more replicas differ in " + (
            ", ".join(differ) or "a combination of fields"
        )
    sides = ([] if one else ["1 replica"]) + ([] if more else ["more than 1"])
    failed = sorted(
        {
            f"{_replicas(r.case.replicas)} ended {r.status}"
            for r in runs
            if r.measurement is None and (not one if r.case.replicas == 1 else not more)
        }
    )
    return f"{head}: nothing measured at {' or '.join(sides)}" + (
        f" ({', '.join(failed)})" if failed else ""
    )


def _replicas(n: int) -> str:
    return f"{n} replica{'s' if n != 1 else ''}"


def reproduction_table(
    study: Study, results: Sequence[Result]
) -> tuple[list[str], list[list[str]]]:
    """The report's reproduction table: claim | published | here | outcome (and why)."""
    head = ["claim", "published", "here", "outcome"]
    rows = [
        [
            f.claim.id,
            f.claim.published,
            f.here,
            f.outcome
            + (
                f"{':' if f.outcome == 'not measured here' else ';'} {f.reason}" if f.reason else ""
            ),
        ]
        for f in evaluate(study, results)
    ]
    return head, rows
