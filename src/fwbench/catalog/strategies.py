"""The data-parallel strategies fwbench knows, and the rules a case must follow. Pure.

The unit of a distributed case is the per-replica batch (`Case.batch_size`); the global
batch is per-replica x replicas. DistributedDataParallel takes the per-process batch
and tf.distribute the global one: each workload converts (METHODOLOGY rule 13).
"""

from __future__ import annotations

import dataclasses

from fwbench.catalog.frameworks import FRAMEWORKS, Strategy
from fwbench.tasks import all_tasks, find_task


def all_strategies() -> dict[str, Strategy]:
    """Every framework's strategies by name, with the framework each belongs to filled in.

    Built on each call, from the registry (plugins included): never at import time.
    """
    return {
        s.name: dataclasses.replace(s, framework=name)
        for name, info in FRAMEWORKS.items()
        for s in info.strategies
    }


def get_strategy(name: str) -> Strategy | None:
    return all_strategies().get(name)


def strategies_of(framework: str) -> list[str]:
    return [s.name for s in all_strategies().values() if s.framework == framework]


def check(
    framework: str, strategy: str | None, world_size: int | None, mode: str, task: str
) -> None:
    """Raise ValueError (one line, naming the valid choices) for an impossible combination.

    A strategy that needs devices this machine lacks is not an error here: the case is
    valid anywhere and recorded as unsupported where it cannot run.
    """
    if strategy is None:
        if world_size is not None and world_size > 1:
            raise ValueError(
                f"world_size: {world_size} workers need a strategy; valid choices for "
                f"{framework}: {', '.join(strategies_of(framework))}"
            )
        return
    found = get_strategy(strategy)
    if found is None:
        raise ValueError(
            f"strategy: unknown strategy {strategy!r}; valid choices: {', '.join(all_strategies())}"
        )
    if found.framework != framework:
        raise ValueError(
            f"strategy: {strategy} ({found.label}) is not a {framework} strategy; "
            f"valid choices for {framework}: {', '.join(strategies_of(framework))}"
        )
    if mode not in found.modes:
        raise ValueError(
            f"mode: strategy {strategy} runs in {', '.join(found.modes)} mode; "
            f"valid choices: {', '.join(found.modes)}"
        )
    found_task = find_task(task)
    if found_task is not None and not found_task.trains:
        training = ", ".join(t.name for t in all_tasks().values() if t.trains)
        raise ValueError(
            f"task: strategy {strategy} benchmarks training; valid choices: {training}"
        )
