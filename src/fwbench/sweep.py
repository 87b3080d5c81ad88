"""Sweeps: a YAML file (or a built-in preset) that expands to a grid of Cases.

Keys are named like the `run` flags. Each axis is a value, a list, or a mapping from
framework name to a value or list (e.g. `mode: {torch: eager, tensorflow: graph}`) whose
keys are frameworks of the sweep. It names every framework of the sweep (one left out would
get no case: refused), but on `options`, where one left out gets no options, and each case
takes the settings that apply to its task and mode. A key is given once, and not as null:
left out, it takes its default.
`exclude` is a list of partial cases; a case matching every key of one rule is dropped,
a key naming a default (precision fp32, a model's own input size) matching the cases that
take it where the sweep leaves that axis out.
`timing` overrides measurement settings, `timeout_s` the per-case time limit and `budget`
(seconds, or "5m") the wall-clock time its workloads share (as `--budget`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fwbench.case import Case, default_mode, option_values_of
from fwbench.catalog.frameworks import FRAMEWORKS, core_frameworks
from fwbench.catalog.models import all_dimensions, all_models, find_model
from fwbench.catalog.sources import source_of
from fwbench.catalog.strategies import get_strategy
from fwbench.errors import SpecError, broken_yaml, duration_seconds, positive_seconds
from fwbench.measure.settings import PART_OF, PARTS, TimingConfig
from fwbench.scenario.spec import ServeSpec, check_point
from fwbench.tasks import find_task, task_dimensions
from fwbench.tasks.train import TRAIN

# Outer to inner: the framework varies fastest, so both frameworks of one workload run
# back to back and share the machine's state (thermal, background load) as far as possible.
AXES: tuple[str, ...] = (
    "model",
    "task",
    "batch_size",
    "precision",
    "device",
    "threads",
    "world_size",
    "strategy",
    "framework",
    "mode",
    "options",
    "layout",
    "autotune",
)
# Every model dimension declared (catalog.models.DIMENSIONS: input_size, seq_len, ... and
# a plugin's) is an axis of its name after batch_size, and each task's own dimensions
# (fwbench.tasks: a generation's new_tokens) after them: all_axes(). A dimension left out
# takes each model's (each task's) default.
# study: the study whose claims a report of this sweep evaluates (fwbench.studies).
# serve: serving scenarios (fwbench.serve); each case is served under each of them.
# input_shape, objective: a model of the user's (fwbench.user_models): its inputs' shapes
# (one shape, or a list of NAME=SHAPE for several inputs) and its training objective.
# band: the equivalence band its verdicts read ("5%" or 0.05), recorded with each result.
OTHER_KEYS: tuple[str, ...] = (
    "name", "description", "exclude", "timing", "timeout_s", "budget", "band", "study",
    "serve", "input_shape", "objective",
)  # fmt: skip
# Makes a user's model ready for cases (fwbench.user_models.prepare, handed in by the
# command: describing a model starts a worker, which a sweep file alone does not).
Prepare = Callable[[str, Sequence[str], str | None], Any]
# Bounds on what a sweep file may ask for: a small file must not exhaust the machine
# (a YAML alias bomb, a list of millions of values). --max-cases raises the last.
MAX_FILE_BYTES = 1 << 20
MAX_VALUES = 100_000  # scalars in the loaded document, aliases counted as expanded
MAX_CASES = 10_000
# The framework axis left out is the core comparison (the registry's core frameworks; the
# others when named), asked of the registry when a file is read: plugins may add to it.
DEFAULTS: dict[str, Any] = {
    "task": [TRAIN.name],
    "batch_size": [32],
    "device": ["cpu"],
    # None: each framework's default mode (fwbench.case.default_mode).
    "mode": [None],
}
# Axes that vary per framework inside a workload (a mapping may name some frameworks
# only). `options` left out for a framework means none: the framework decides.
INNER = ("framework", "mode", "options")
# What a key left out means, for the refusal of `key: null` (YAML's null, or an empty
# value, is no value: it used to mean the default without saying so).
LEFT_OUT: dict[str, str] = {
    "task": f"the default ({DEFAULTS['task'][0]})",
    "batch_size": f"the default ({DEFAULTS['batch_size'][0]})",
    "device": f"the default ({DEFAULTS['device'][0]})",
    "mode": "each framework's default mode",
    "precision": "the default (fp32)",
    "layout": "each framework's native layout",
    "autotune": "the default (off)",
    "threads": "the default (the physical cores, shared by a case's processes)",
    "world_size": "the default (one replica)",
    "strategy": "no strategy (single-process cases)",
    "options": "none (each framework decides)",
    "name": "the file's name",
    "description": "none",
    "exclude": "no exclusions",
    "timing": "the default measurement settings",
    "timeout_s": "the default time limit (--timeout)",
    "budget": "no budget",
    "band": "the default band (2%)",
    "study": "none",
    "serve": "none",
    "input_shape": "what each model of your own declares",
    "objective": "the mean of a model of your own's outputs",
}


def all_axes() -> tuple[str, ...]:
    """AXES with the declared dimensions after the batch: the models' (each applied to the
    models that take it), then the registered tasks' (each applied to the cases of the
    tasks that declare it). Each is a sweep key of its name."""
    models = tuple(all_dimensions())
    tasks = tuple(task_dimensions())
    clash = [name for name in (*models, *tasks) if name in AXES or name in OTHER_KEYS]
    clash += [name for name in tasks if name in models]
    if clash:
        raise SpecError(
            f"dimension {clash[0]!r} has the name of a sweep key; a model or task must "
            "name its dimensions apart from the case's fields and each other's"
        )
    at = AXES.index("batch_size") + 1
    return (*AXES[:at], *models, *tasks, *AXES[at:])


def _left_out(key: str) -> str | None:
    if key in LEFT_OUT:
        return LEFT_OUT[key]
    if key in all_dimensions():
        return "each model's default"
    return "each task's default" if key in task_dimensions() else None


class Sweep:
    """A parsed, validated sweep: its cases and how to measure them."""

    def __init__(
        self,
        name: str,
        cases: list[Case],
        timing: TimingConfig,
        timeout_s: float | None,
        description: str = "",
        study: str | None = None,
        serve: tuple[ServeSpec, ...] = (),
        budget_s: float | None = None,
    ) -> None:
        self.name = name
        self.budget_s = budget_s  # wall-clock time shared by its workloads (--budget)
        self.serve = serve
        self.study = study
        self.cases = cases
        self.timing = timing
        self.timeout_s = timeout_s
        self.description = description


# Seconds a run costs besides its measured blocks: the worker's start, the model's build,
# its first step and warmup. Measured by the project on its 2-core VM for the quick
# preset's small models (about 3.3 s a run); larger models, compiled modes and GPUs take
# longer, so an estimate from it is the least a sweep of those takes.
RUN_OVERHEAD_S = 3.3
# A sweep estimated to take longer than this, or with more cases, runs only after a yes.
CONFIRM_S = 2 * 3600.0
CONFIRM_CASES = 1000


@dataclass(frozen=True)
class Estimate:
    """How long a sweep's cases take, run one after another: runs per case x (overhead
    + measured time per run), from the timing settings alone."""

    cases: int
    runs: tuple[int, int]  # fewest, most per case
    run_s: float  # measured time per run (its blocks)
    low_s: float
    high_s: float

    @property
    def needs_confirmation(self) -> bool:
        return self.cases > CONFIRM_CASES or self.low_s > CONFIRM_S

    def describe(self) -> str:
        runs = (
            f"{self.runs[0]}" if self.runs[0] == self.runs[1] else f"{self.runs[0]}-{self.runs[1]}"
        )
        span = _duration(self.low_s)
        if _duration(self.high_s) != span:
            span = f"{span} to {_duration(self.high_s)}"
        return (
            f"estimated {span} ({runs} runs per case x ({RUN_OVERHEAD_S:g} s to start, build "
            f"and warm up + {self.run_s:g} s measuring); longer for large models and compiled "
            "modes)"
        )


def estimate(cases: int, timing: TimingConfig, budget_s: float | None = None) -> Estimate:
    """The sweep's duration from its timing settings: a case makes min_runs runs, and adds
    runs (up to max_runs) until its runs' blocks reach max_time_s; a budget cuts the runs
    beyond min_runs."""
    plan = timing.plan
    run_s = min(timing.run.run_time_s, plan.max_time_s)
    most = min(plan.max_runs, max(plan.min_runs, math.ceil(plan.max_time_s / run_s)))
    per_run = RUN_OVERHEAD_S + run_s
    low, high = cases * plan.min_runs * per_run, cases * most * per_run
    if budget_s is not None:
        high = max(low, min(high, budget_s))
    return Estimate(cases, (plan.min_runs, most), run_s, low, high)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def presets() -> list[str]:
    files = resources.files("fwbench.presets").iterdir()
    return sorted(p.name.removesuffix(".yaml") for p in files if p.name.endswith(".yaml"))


def load_preset(name: str, max_cases: int = MAX_CASES, prepare: Prepare | None = None) -> Sweep:
    if name not in presets():
        raise SpecError(f"unknown preset {name!r}; valid choices: {', '.join(presets())}")
    text = resources.files("fwbench.presets").joinpath(f"{name}.yaml").read_text()
    return parse(text, source=f"preset {name}", max_cases=max_cases, prepare=prepare)


def load_file(path: Path, max_cases: int = MAX_CASES, prepare: Prepare | None = None) -> Sweep:
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read sweep file {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SpecError(
            f"{path}: over {MAX_FILE_BYTES // 1024} KiB; a sweep file lists axis values, "
            "not data (is this the right file?)"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    return parse(text, source=str(path), max_cases=max_cases, prepare=prepare)


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: Any, lines: list[int]) -> None:
        super().__init__(f"duplicate key {key!r}")
        self.key = key
        self.lines = lines


class _Loader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (PyYAML keeps the last
    one without a word). Keys brought in by a merge (`<<: *base`) may be overridden."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                if key in seen:
                    raise _DuplicateKey(key, [seen[key], line])
                seen[key] = line
            except TypeError:
                continue  # an unhashable key: the constructor below says so
        return super().construct_mapping(node, deep=deep)


def _count_values(data: Any, limit: int) -> int:
    """Scalars in `data`, shared (aliased) parts counted each time they are used; stops
    counting past `limit`, so a billion-laughs document costs nothing to reject."""
    count, stack = 0, [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        else:
            count += 1
        if count > limit or len(stack) > limit:
            return limit + 1
    return count


def parse(
    text: str, source: str = "sweep", max_cases: int = MAX_CASES, prepare: Prepare | None = None
) -> Sweep:
    try:
        data = yaml.load(text, Loader=_Loader)  # a SafeLoader: no Python objects
    except _DuplicateKey as exc:
        first, second = exc.lines
        where = f"at lines {first} and {second}" if first != second else f"on line {first}"
        raise SpecError(
            f"{source}: key {exc.key!r} is given twice, {where}; give each key once"
        ) from None
    except yaml.YAMLError as exc:
        raise broken_yaml(source, exc) from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a sweep must be a YAML mapping of keys like 'model: resnet18'")
    if _count_values(data, MAX_VALUES) > MAX_VALUES:
        raise SpecError(
            f"{source}: over {MAX_VALUES:,} values once YAML aliases are expanded; "
            "a sweep lists axis values, not data"
        )
    keys = all_axes()
    unknown = sorted(set(data) - set(keys) - set(OTHER_KEYS))
    if unknown:
        raise SpecError(
            f"{source}: unknown key {unknown[0]!r}; valid keys: {', '.join((*keys, *OTHER_KEYS))}"
        )
    if "model" not in data:
        raise SpecError(f"{source}: missing key 'model' (a model name or a list of them)")
    for key, value in data.items():
        left_out = _left_out(key)
        if left_out and (value is None or (key in keys and _is_null(value))):
            raise SpecError(
                f"{source}: {key}: null is not a value; leave the key out for {left_out}"
            )
    defaults = {**DEFAULTS, "framework": core_frameworks()}
    axes = {axis: _axis(source, axis, data.get(axis, defaults.get(axis, [None]))) for axis in keys}
    _check_framework_keys(source, axes, given="framework" in data)
    excludes = _excludes(source, data.get("exclude", []), keys)
    timing = _timing(source, data.get("timing", {}), data.get("band"))
    timeout = data.get("timeout_s")
    if timeout is not None:
        timeout = positive_seconds(timeout, f"{source}: timeout_s")
    budget = data.get("budget")
    if budget is not None:
        # A number of seconds, or a duration as the flag takes it ("5m").
        name = f"{source}: budget"
        budget = (
            duration_seconds(budget, name)
            if isinstance(budget, str)
            else positive_seconds(budget, name)
        )
    upper = 1
    for axis in keys:
        upper *= max(1, len(_flat(axes[axis])))
    if upper > max_cases:
        raise SpecError(
            f"{source}: the axes combine into up to {upper:,} cases, over the limit of "
            f"{max_cases:,}; narrow the sweep or raise the limit with --max-cases"
        )
    models = _users(source, axes, data, prepare)
    cases = _expand(source, axes, excludes, models)
    return Sweep(
        name=str(data.get("name") or source),
        cases=cases,
        timing=timing,
        timeout_s=float(timeout) if timeout is not None else None,
        description=str(data.get("description") or ""),
        study=_study(source, data.get("study")),
        serve=_serve(source, data.get("serve"), cases),
        budget_s=budget,
    )


def _timing(source: str, value: Any, band: Any = None) -> TimingConfig:
    """The `timing` key: a mapping of TimingConfig's settings, each by its own name; and
    the `band` key, the equivalence band of its verdicts."""
    valid = ", ".join(PART_OF)
    if not isinstance(value, dict):
        raise SpecError(
            f"{source}: timing: must be a mapping of settings, e.g. {{min_runs: 5}}; "
            f"valid keys: {valid}"
        )
    unknown = [k for k in value if k not in PART_OF]
    if unknown:
        raise SpecError(f"{source}: timing: unknown key {unknown[0]!r}; valid keys: {valid}")
    if band is not None and "band" in value:
        raise SpecError(f"{source}: band: given twice (also in timing); give it once")
    try:
        timing = TimingConfig(**value)
    except ValidationError as exc:
        raise SpecError(f"{source}: timing: {_first_error(exc)}") from None
    if band is None:
        return timing
    try:
        return timing.replace(band=band)
    except ValidationError as exc:
        raise SpecError(f"{source}: {_first_error(exc)}") from None


def _check_framework_keys(source: str, axes: dict[str, Any], given: bool) -> None:
    """A mapping's keys must be the sweep's frameworks: a key that is not one would be
    ignored, and a framework left out (but on `options`, where that means none) would
    lose every case, the sweep running without it and without a word."""
    frameworks = [str(fw) for fw in axes["framework"]]
    which = ", ".join(frameworks) + ("" if given else ": the default")
    for axis, value in axes.items():
        if not isinstance(value, dict):
            continue
        for fw in value:
            if fw not in frameworks:
                raise SpecError(
                    f"{source}: {axis}: {fw} is not one of the sweep's frameworks ({which}); "
                    f"add it to `framework` or take it out of `{axis}`"
                )
        missing = [fw for fw in frameworks if fw not in value]
        if missing and axis != "options":
            fw = missing[0]
            # Its default mode, else what the mapping gives the first framework it names.
            # (An empty mapping names none: "...".)
            first = next(iter(value.values()), "...")
            given_first = first if isinstance(first, list) else [first]
            shown = [default_mode(fw) or "..."] if axis == "mode" else given_first
            example = shown[0] if len(shown) == 1 else f"[{', '.join(map(str, shown))}]"
            raise SpecError(
                f"{source}: {axis}: no value for {fw}, one of the sweep's frameworks "
                f"({which}), which would get no case; add `{fw}: {example}` to `{axis}` "
                f"or take {fw} out of `framework`"
            )


def _serve(source: str, value: Any, cases: list[Case]) -> tuple[ServeSpec, ...]:
    """The `serve` key: one scenario mapping or a list of them; its cases must be of a
    task that serves, and its bounds of the kind the task answers with."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(i, dict) for i in items):
        raise SpecError(
            f"{source}: serve: a scenario mapping (e.g. {{scenario: server}}) or a list of them"
        )
    specs = []
    for item in items:
        try:
            specs.append(ServeSpec.build(**item))
        except SpecError as exc:
            raise SpecError(f"{source}: {exc}") from None
    for case in cases:
        for spec in specs:
            try:
                check_point(case, spec)
            except SpecError as exc:
                raise SpecError(f"{source}: {exc}") from None
    return tuple(specs)


def _axis(source: str, axis: str, value: Any) -> Any:
    """A list of values, or a dict framework -> list of values."""
    if isinstance(value, dict):
        if axis == "framework":
            raise SpecError(f"{source}: framework must be a name or a list of names")
        bad = sorted(set(value) - set(FRAMEWORKS))
        if bad:
            raise SpecError(
                f"{source}: {axis}: unknown framework {bad[0]!r} as a key; "
                f"valid choices: {', '.join(FRAMEWORKS)}"
            )
        for fw, v in value.items():
            if _is_null(v) and _left_out(axis):
                raise SpecError(
                    f"{source}: {axis}: null is not a value (for {fw}); give {fw} a value, "
                    f"or leave the key out for {_left_out(axis)}"
                )
        return {fw: _values(source, axis, v) for fw, v in value.items()}
    return _values(source, axis, value)


def _is_null(value: Any) -> bool:
    """null, or a list of nothing but nulls (a null beside other values has a meaning:
    `strategy: [ddp, null]` adds the plain cases)."""
    if isinstance(value, list):
        return bool(value) and all(v is None for v in value)
    return value is None


# Axes that take a true/false value; on every other axis YAML's true is a mistake (it
# would be read as 1: `batch_size: true`).
BOOLEAN_AXES = ("autotune",)
REQUIRED = {"framework": "a framework name", "model": "a model name"}


def _values(source: str, axis: str, value: Any) -> list[Any]:
    values = value if isinstance(value, list) else [value]
    if not values:
        raise SpecError(f"{source}: {axis} is an empty list")
    name = axis.removeprefix("exclude.")
    for v in values:
        if isinstance(v, dict | list):
            raise SpecError(f"{source}: {axis}: {v!r} is not a single value")
        if isinstance(v, bool) and name not in BOOLEAN_AXES:
            raise SpecError(f"{source}: {axis}: {str(v).lower()} is not a valid value")
        if v is None and name in REQUIRED:
            raise SpecError(f"{source}: {axis}: null is not {REQUIRED[name]}")
    # Duplicates are dropped before any case is built from them.
    return list(dict.fromkeys(values))


def _excludes(source: str, rules: Any, keys: tuple[str, ...]) -> list[dict[str, list[Any]]]:
    if not isinstance(rules, list):
        raise SpecError(f"{source}: exclude must be a list of mappings like '- {{model: vgg16}}'")
    out = []
    for rule in rules:
        if not isinstance(rule, dict) or not rule:
            raise SpecError(f"{source}: exclude: each rule must be a mapping, got {rule!r}")
        bad = sorted(set(rule) - set(keys))
        if bad:
            raise SpecError(
                f"{source}: exclude: unknown key {bad[0]!r}; valid keys: {', '.join(keys)}"
            )
        out.append({k: _values(source, f"exclude.{k}", v) for k, v in rule.items()})
    return out


def _users(
    source: str, axes: dict[str, Any], data: dict[str, Any], prepare: Prepare | None
) -> dict[str, Any]:
    """The sweep's models of the user's, each made ready (its inputs, objective and the
    batch they may fix) by `prepare`: model text -> its case fields."""
    shapes = data.get("input_shape", [])
    shapes = [shapes] if isinstance(shapes, str) else shapes
    objective = data.get("objective")
    if not isinstance(shapes, list) or not all(isinstance(x, str) for x in shapes):
        raise SpecError(f"{source}: input_shape: a shape, or a list of NAME=SHAPE")
    if objective is not None and not isinstance(objective, str):
        raise SpecError(f"{source}: objective: a name (mean, classify, lm)")
    found: dict[str, Any] = {}
    for model in _flat(axes["model"]):
        text = str(model)
        if text.lower() in all_models() or source_of(text) is None:
            continue  # the zoo's (or unknown: Case.build names the valid choices)
        if prepare is None:
            raise SpecError(f"{source}: model {text}: a model of your own needs `fwbench sweep`")
        try:
            prepared = prepare(text, shapes, objective)
        except SpecError as exc:
            raise SpecError(f"{source}: {exc}") from None
        fields = dict(prepared.fields)
        if prepared.batch is not None:
            given = [b for b in _flat(axes["batch_size"]) if b is not None]
            if "batch_size" in data and given != [prepared.batch]:
                raise SpecError(
                    f"{source}: batch_size: {prepared.spec.name} takes a batch of "
                    f"{prepared.batch} only (its inputs fix it); leave batch_size out"
                )
            fields["batch_size"] = prepared.batch
        found[text] = fields
    if (shapes or objective) and not found:
        key = "input_shape" if shapes else "objective"
        raise SpecError(f"{source}: {key} applies to models of your own; the sweep has none")
    return found


def _expand(
    source: str,
    axes: dict[str, Any],
    excludes: list[dict[str, list[Any]]],
    users: dict[str, Any] | None = None,
) -> list[Case]:
    cases: list[Case] = []
    seen: set[str] = set()
    excluded = 0
    outer = [a for a in axes if a not in INNER]
    strategies = [s for s in _flat(axes["strategy"]) if s is not None]
    for combo in itertools.product(*(_flat(axes[a]) for a in outer)):
        fields = dict(zip(outer, combo, strict=True))
        for fw in axes["framework"]:
            per_fw = {a: _for(axes[a], fw) for a in outer}
            if any(fields[a] not in per_fw[a] for a in outer):
                continue
            modes_and_options = itertools.product(
                _for(axes["mode"], fw), _for(axes["options"], fw) or [None]
            )
            for given, options in modes_and_options:
                mode = given if given is not None else default_mode(fw, fields.get("strategy"))
                candidate = _applicable(
                    _settings_applying(
                        {**fields, "framework": fw, "mode": mode, "options": options}
                    )
                )
                if not _distributed_fits(candidate, strategies) or not _task_fits(candidate):
                    continue
                if any(_matches(candidate, rule) for rule in excludes):
                    excluded += 1
                    continue
                prepared = (users or {}).get(str(candidate["model"]))
                if prepared is not None:
                    candidate = {**candidate, **prepared}
                try:
                    case = Case.build(**_fold_task_dims(candidate))
                except SpecError as exc:
                    raise SpecError(f"{source}: {exc}") from None
                # A rule naming a default (fp32, a model's own input size, autotune off)
                # matches the case as built, where an axis left out has no value.
                if any(_matches(_built(case), rule) for rule in excludes):
                    excluded += 1
                    continue
                if case.key() not in seen:
                    seen.add(case.key())
                    cases.append(case)
    if not cases and excluded:
        raise SpecError(f"{source}: the sweep expands to no case: `exclude` removes all {excluded}")
    for name in strategies:
        if not any(c.strategy == str(name).lower() for c in cases):
            found = get_strategy(str(name).lower())
            needs = (
                f" (it needs {found.framework} in {'/'.join(found.modes)} mode)" if found else ""
            )
            raise SpecError(
                f"{source}: strategy {name} applies to none of the sweep's cases{needs}"
            )
    # A setting given applies to a case of its task and mode (_settings_applying).
    carried = {name for c in cases for name in c.option_values}
    for value in _flat(axes["options"]):
        try:
            given = option_values_of(value)
        except ValueError as exc:  # given only to cases `exclude` removed: never validated
            raise SpecError(f"{source}: {exc}") from None
        for name in given:
            if name not in carried:
                raise SpecError(
                    f"{source}: options: {name} applies to none of the sweep's cases"
                    f"{_scope_of(name)}"
                )
    # A dimension given a value applies to a case whose model (or task) declares it.
    owners: list[tuple[Iterable[str], str, Callable[[Case], Iterable[str]], Callable[[Case], str]]]
    owners = [
        (all_dimensions(), "models", lambda c: c.dims, lambda c: c.model),
        (task_dimensions(), "tasks", lambda c: c.task_values, lambda c: c.task),
    ]
    for names, what, declared, owner in owners:
        for dim in names:
            given = [v for v in _flat(axes[dim]) if v is not None]
            if given and all(dim not in declared(c) for c in cases):
                raise SpecError(
                    f"{source}: {dim} applies to none of the sweep's {what} "
                    f"({', '.join(sorted({owner(c) for c in cases}))})"
                )
    if not cases:
        raise SpecError(f"{source}: the sweep expands to no case")
    return cases


def _applicable(fields: dict[str, Any]) -> dict[str, Any]:
    """Drop the dimensions the case's model does not take: one sweep can mix image and
    token models, each reading only its own axes (duplicates are removed by key). Axes
    left out (None) take the case's defaults: threads default per world size."""
    declared = all_dimensions()
    fields = {k: v for k, v in fields.items() if v is not None or k in declared}
    task = find_task(str(fields.get("task")))
    own = {d.name for d in task.dimensions} if task else set()
    others = set(task_dimensions()) - own
    fields = {k: v for k, v in fields.items() if k not in others}
    spec = find_model(str(fields["model"]))
    if spec is None:
        return fields  # unknown model: Case.build names the valid choices
    return {k: v for k, v in fields.items() if k not in declared or k in spec.dims}


def _settings_applying(fields: dict[str, Any]) -> dict[str, Any]:
    """The case's options without the settings that do not apply to its task and mode, as
    its dimensions drop what its model does not take: `options: {flax: [state=arrays]}`
    beside `mode: [jit, nnx-jit]` gives jit the setting and nnx-jit none (duplicates are
    removed by key). A name the framework lacks stays, for Case.build to name."""
    info = FRAMEWORKS.get(str(fields.get("framework")))
    if info is None or not info.settings or not fields.get("options"):
        return fields
    try:
        given = option_values_of(fields["options"])
    except ValueError:
        return fields  # Case.build refuses it in its words
    if not given:
        return fields
    known = {setting.name: setting for setting in info.settings}
    task, mode = str(fields.get("task") or TRAIN.name), str(fields["mode"])
    kept = [
        f"{name}={value}"
        for name, value in given.items()
        if (found := known.get(name)) is None or found.applies(task, mode)
    ]
    return {**fields, "options": ",".join(kept) or None}


def _scope_of(setting: str) -> str:
    """Where a framework's setting applies, in words for an error (" (it applies to mode
    jit only)"), or "" where it applies everywhere."""
    for info in FRAMEWORKS.values():
        for found in info.settings:
            if found.name == setting and found.scope():
                return f" (it applies to {found.scope()} only)"
    return ""


def _fold_task_dims(fields: dict[str, Any]) -> dict[str, Any]:
    """The case's fields with its task's dimensions (flat keys while the grid is expanded
    and `exclude` matched) as the case's task_dims."""
    dims = task_dimensions()
    own = {k: v for k, v in fields.items() if k in dims}
    rest = {k: v for k, v in fields.items() if k not in dims}
    return {**rest, "task_dims": own} if own else rest


def _task_fits(case: dict[str, Any]) -> bool:
    """Inference-only frameworks (the runtimes) take the grid's infer cases only, so one
    sweep can put them beside the training frameworks."""
    info = FRAMEWORKS.get(str(case.get("framework")))
    return info is None or info.does(str(case.get("task") or TRAIN.name)).available


def _distributed_fits(case: dict[str, Any], strategies: list[Any]) -> bool:
    """A strategy applies to its framework in its modes; several workers apply to the
    strategies. So `strategy: [ddp, multiworker]` beside `framework: [torch, tensorflow]`
    gives each framework its own, and `world_size: [1, 2]` a plain case plus the rest."""
    name = case.get("strategy")
    if name is None:
        return not strategies or int(case.get("world_size") or 1) == 1
    found = get_strategy(str(name).lower())
    if found is None:
        return True  # unknown strategy: Case.build names the valid choices
    return found.framework == case["framework"] and case["mode"] in found.modes


def _flat(axis: Any) -> list[Any]:
    if isinstance(axis, dict):
        return list(dict.fromkeys(v for vs in axis.values() for v in vs))
    return list(axis)


def _for(axis: Any, framework: str) -> list[Any]:
    """The values of an axis for one framework; a framework missing from a mapping gets none."""
    if isinstance(axis, dict):
        return list(axis.get(framework, []))
    return list(axis)


def _built(case: Case) -> dict[str, Any]:
    """A built case as an `exclude` rule reads it: its fields, its dimensions (the model's
    defaults included) and its defaults by their values."""
    view = {**case.model_dump(exclude={"dims"}), **case.dims, **case.task_values}
    return view | {
        "precision": case.precision or "fp32",
        "autotune": bool(case.autotune),
        "world_size": case.replicas,
    }


def _matches(case: dict[str, Any], rule: dict[str, list[Any]]) -> bool:
    return all(str(case.get(k)).lower() in {str(v).lower() for v in vs} for k, vs in rule.items())


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    # A setting is named by itself, not by the part of the settings that holds it.
    loc = ".".join(str(p) for p in err["loc"] if str(p) not in PARTS)
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def _study(source: str, value: Any) -> str | None:
    if value is None:
        return None
    from fwbench.studies import studies

    if value not in studies():
        raise SpecError(
            f"{source}: study: unknown study {value!r}; valid choices: {', '.join(studies())}"
        )
    return str(value)
