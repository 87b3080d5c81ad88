"""Count trainable parameters (and optionally FLOPs) of models in one framework, in a
count worker.

Counting builds models but times nothing, so count workers of different frameworks may
run side by side. A model that kills its worker (a crash, a hang) is retried alone, so
it costs only its own count, never the others' in the same batch.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from fwbench import cache
from fwbench.catalog.frameworks import get_framework
from fwbench.launch import outcome, process
from fwbench.launch.protocol import CountItem, CountRequest

# The user's cache's entries of counts (fwbench.cache).
CACHE_KIND = "counts"


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
    requests: Mapping[str, Sequence[CountItem]], timeout_s: float, refresh: bool = False
) -> tuple[dict[str, list[Count]], int]:
    """count_in_each, each framework's answers kept in the user's cache (fwbench.cache)
    under its version, the model, its dimensions and whether FLOPs were counted: a count
    made once is not made again until the framework changes (or `refresh`). Only the
    framework's own answers are kept (a crash or a time-out is tried again). Returns the
    counts and how many came from the cache."""
    found: dict[str, list[Count | None]] = {}
    missing: dict[str, list[tuple[int, CountItem]]] = {}
    keys: dict[tuple[str, int], str] = {}
    hits = 0
    for fw, items in requests.items():
        version = get_framework(fw).version()
        found[fw] = [None] * len(items)
        for i, item in enumerate(items):
            key = json.dumps([fw, version, item.model, item.reference, item.dims, item.flops])
            keys[(fw, i)] = key
            hit = None if refresh else cache.read(CACHE_KIND, key)
            if isinstance(hit, list) and len(hit) == 3:
                found[fw][i] = Count(hit[0], hit[1], hit[2])
                hits += 1
            else:
                missing.setdefault(fw, []).append((i, item))
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
