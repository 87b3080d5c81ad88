"""Count trainable parameters (and optionally FLOPs) of models in one framework, in a
count worker.

Counting builds models but times nothing, so count workers of different frameworks may
run side by side. A model that kills its worker (a crash, a hang) is retried alone, so
it costs only its own count, never the others' in the same batch.

The counts a run of cases checks its same work against (`parameter_counts`) are kept in
the results database (the store is handed in as a `CountCache`) and in the user's cache,
which `fwbench models` reads too, under each framework's version and the identity of
the code that builds models (`counted_version`: fwbench's and the plugins').
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple, Protocol

from fwbench import cache
from fwbench.case import Case
from fwbench.catalog.frameworks import FRAMEWORKS, get_framework
from fwbench.catalog.models import ZOO
from fwbench.catalog.sources import get_source
from fwbench.launch import outcome, process
from fwbench.launch.protocol import CountItem, CountRequest

# The user's cache's entries of counts (fwbench.cache).
CACHE_KIND = "counts"


@functools.cache
def _model_code() -> str:
    """The identity of the code that builds models: fwbench's catalog and builders
    (every source file of fwbench.catalog and fwbench.models) and the plugins' modules
    with the local modules they import (a plugin registers models and frameworks), so a
    count made before a model was added to a framework, or its layers changed, is not
    read after."""
    import fwbench.catalog
    import fwbench.models
    from fwbench import plugins

    h = hashlib.sha256()
    for package in (fwbench.catalog, fwbench.models):
        root = Path(package.__path__[0])
        for file in sorted(root.rglob("*.py")):
            h.update(f"{package.__name__}/{file.relative_to(root)}".encode() + b"\0")
            h.update(file.read_bytes() + b"\0")
    plugins.load()
    for name in plugins.modules():
        origin = getattr(sys.modules.get(name), "__file__", None)
        h.update(f"plugin {name} {_plugin_code(origin)}".encode() + b"\0")
    return h.hexdigest()[:12]


def _plugin_code(file: str | None) -> str:
    """A plugin module's code with its local imports, or its own bytes where those are
    too many to follow (a module of a large package)."""
    from fwbench.errors import SpecError
    from fwbench.models.sources.common import code_digest, digest

    if file is None:
        return ""
    try:
        return code_digest(Path(file))
    except SpecError:
        return digest(Path(file))


def counted_version(framework: str) -> str | None:
    """What a count is cached under beside the model: the framework's version and
    fwbench's model code (`_model_code`); None where the framework is not installed."""
    version = get_framework(framework).version()
    return None if version is None else f"{version} (models {_model_code()})"


# model, its dimensions as canonical JSON, and what resolves a user's model ("" for the
# zoo's): a count is cached under the first two (a user's model's name carries its hash).
ParityKey = tuple[str, str, str]


class CountCache(Protocol):
    """Where counts are kept between commands (the results database), by (model,
    framework, framework version, dimensions as JSON): a count or the framework's error."""

    def param_count(
        self, key: tuple[str, str, str, str]
    ) -> tuple[int | None, str | None] | None: ...

    def put_param_count(
        self, key: tuple[str, str, str, str], params: int | None, error: str | None
    ) -> None: ...


class Count(NamedTuple):
    params: int | None
    error: str | None
    flops: float | None = None  # one inference step at batch size 1, when asked for
    # The framework's own answer (a count, or its error building the model), as opposed
    # to a worker that crashed or timed out: only a definitive answer is worth caching.
    definitive: bool = True


def count_params(framework: str, items: Sequence[CountItem], timeout_s: float) -> list[Count]:
    report = process.run_count(CountRequest(framework=framework, items=tuple(items)), timeout_s)
    if not isinstance(report, outcome.WorkerFailure):
        flops = report.flops or [None] * len(report.counts)
        return [Count(*row) for row in zip(report.counts, report.errors, flops, strict=True)]
    if len(items) == 1:
        return [Count(None, f"{report.status}: {report.error}", None, definitive=False)]
    return [c for item in items for c in count_params(framework, [item], timeout_s)]


def count_in_each(
    requests: Mapping[str, Sequence[CountItem]], timeout_s: float
) -> dict[str, list[Count]]:
    """Counts per framework, one count worker per framework, all at once."""
    return process.in_threads(
        {
            fw: functools.partial(count_params, fw, items, timeout_s)
            for fw, items in requests.items()
        }
    )


def cached_count_in_each(
    requests: Mapping[str, Sequence[CountItem]],
    timeout_s: float,
    refresh: bool = False,
    counting: Callable[[list[str]], None] | None = None,
) -> tuple[dict[str, list[Count]], int]:
    """count_in_each, each framework's answers kept in the user's cache (fwbench.cache)
    under its version, the model, its dimensions and whether FLOPs were counted: a count
    made once is not made again until the model code or the framework changes (or
    `refresh`). Only the framework's own answers are kept (a crash or a time-out is tried
    again). `counting` is told the frameworks that count, before they do, if any must.
    Returns the counts and how many came from the cache."""
    found: dict[str, list[Count | None]] = {}
    missing: dict[str, list[tuple[int, CountItem]]] = {}
    keys: dict[tuple[str, int], str] = {}
    hits = 0
    for fw, items in requests.items():
        version = counted_version(fw)
        found[fw] = [None] * len(items)
        for i, item in enumerate(items):
            key = json.dumps(
                [fw, version, item.model, item.reference, item.dims, item.flops], sort_keys=True
            )
            keys[(fw, i)] = key
            hit = None if refresh else cache.read(CACHE_KIND, key)
            if isinstance(hit, list) and len(hit) == 3:
                found[fw][i] = Count(hit[0], hit[1], hit[2])
                hits += 1
            else:
                missing.setdefault(fw, []).append((i, item))
    if missing and counting is not None:
        counting(list(missing))
    counted = count_in_each(
        {fw: [item for _, item in pairs] for fw, pairs in missing.items()}, timeout_s
    )
    for fw, pairs in missing.items():
        for (i, _), count in zip(pairs, counted[fw], strict=True):
            found[fw][i] = count
            if count.definitive:
                cache.write(CACHE_KIND, keys[(fw, i)], [count.params, count.error, count.flops])
    done = {fw: [c for c in counts if c is not None] for fw, counts in found.items()}
    return done, hits


def parity_key(case: Case) -> ParityKey:
    return (case.model, json.dumps(case.dims, sort_keys=True), case.model_path or "")


def parity_frameworks(cases: Sequence[Case]) -> list[str]:
    """Frameworks whose parameter counts each case is checked against.

    Those of the run itself; a single-framework run is checked against every other
    installed framework that implements the model, so `fwbench run` alone still flags
    different work. Keras' other backends build TensorFlow's Keras models: they add
    nothing to that check unless the run uses them. A user's model only where its
    source runs it.
    """
    named = sorted({c.framework for c in cases})
    if len(named) > 1:
        return named
    others = [n for n, info in FRAMEWORKS.items() if info.installed() and info.models_from is None]
    # A framework that does not implement a zoo model (Flax NNX builds the study's CNNs only)
    # has nothing to count.
    specs = {c.model_spec.name: c.model_spec for c in cases}.values()
    zoo = [spec for spec in specs if spec.source == ZOO]
    others = [fw for fw in others if all(spec.builds(fw) for spec in zoo)]
    for spec in (spec for spec in specs if spec.source != ZOO):
        source = get_source(spec.source)
        if source.runs:
            others = [fw for fw in others if source.can(fw, spec)[0]]
    return sorted({*named, *others})


def parity_requests(cases: Sequence[Case], todo: Sequence[Case]) -> dict[str, list[ParityKey]]:
    """The counts that the same-work check of `todo` needs, by framework: every
    framework of `parity_frameworks(cases)` counts each model a case of another framework
    runs. A case's worker counts its own model (parity_for puts that count in), so a
    framework is not counted again for a model only its own cases run: a single-framework
    run counts the other frameworks alone."""
    runs: dict[ParityKey, set[str]] = {}
    for case in todo:
        runs.setdefault(parity_key(case), set()).add(case.framework)
    return {
        fw: needed
        for fw in parity_frameworks(cases)
        if (needed := sorted(key for key, by in runs.items() if by - {fw}))
    }


def parameter_counts(
    store: CountCache,
    requests: Mapping[str, Iterable[ParityKey]],
    timeout_s: float,
    on_progress: Callable[[str], None] | None = None,
) -> dict[tuple[str, ParityKey], int]:
    """Trainable-parameter counts per (framework, key), for the keys asked of each
    framework (`parity_requests`), from the cache or count workers.

    Best effort: a framework that cannot build a model here (its error is cached too)
    leaves the comparison to the frameworks that can.
    """
    counts: dict[tuple[str, ParityKey], int] = {}
    missing: dict[str, list[ParityKey]] = {}
    versions: dict[str, str] = {}
    for fw, fw_keys in requests.items():
        version = counted_version(fw)
        if version is None:
            continue
        versions[fw] = version
        for key in sorted(set(fw_keys)):
            cached = store.param_count((key[0], fw, version, key[1]))
            if cached is None:
                missing.setdefault(fw, []).append(key)
            elif cached[0] is not None:
                counts[(fw, key)] = cached[0]
    if not missing:
        return counts

    def counting(frameworks: list[str]) -> None:
        if on_progress:
            models = len({key for fw in frameworks for key in missing[fw]})
            on_progress(f"counting parameters of {models} models in {', '.join(frameworks)}")

    items = {
        fw: [CountItem(model=m, dims=json.loads(d), reference=r or None) for m, d, r in fw_keys]
        for fw, fw_keys in missing.items()
    }
    # Through the user's cache too: a count is the model code's and the framework's, not
    # the results file's, so a new file does not build every model in every framework again.
    for fw, found in cached_count_in_each(items, timeout_s, counting=counting)[0].items():
        for key, count in zip(missing[fw], found, strict=True):
            # A crash or a time-out is this attempt's, not the model's: not cached, so the
            # next run tries again (a cached error would disable the check for good).
            if count.definitive:
                store.put_param_count((key[0], fw, versions[fw], key[1]), count.params, count.error)
            if count.params is not None:
                counts[(fw, key)] = count.params
    return counts
