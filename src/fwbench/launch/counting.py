"""Count trainable parameters (and optionally FLOPs) of models in one framework, in a
count worker.

Counting builds models but times nothing, so count workers of different frameworks may
run side by side. A model that kills its worker (a crash, a hang) is retried alone, so
it costs only its own count, never the others' in the same batch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from fwbench.launch import outcome, process
from fwbench.launch.protocol import CountItem, CountRequest


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
