"""The data-parallel strategies fwbench knows, and the rules a case must follow. Pure.

The unit of a distributed case is the per-replica batch (`Case.batch_size`); the global
batch is per-replica x replicas. DistributedDataParallel takes the per-process batch
and tf.distribute the global one: each workload converts (METHODOLOGY rule 13).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Strategy:
    name: str
    framework: str
    label: str
    # "per_replica": one process per replica (DDP, MultiWorkerMirroredStrategy);
    # "one": one process driving several devices (DataParallel, MirroredStrategy).
    processes: Literal["per_replica", "one"]
    devices: tuple[str, ...]  # where it can run; elsewhere a case is recorded unsupported
    modes: tuple[str, ...]
    batch_semantics: str  # how the framework's API takes the batch, for the record

    def process_count(self, world_size: int) -> int:
        return world_size if self.processes == "per_replica" else 1


STRATEGIES: dict[str, Strategy] = {
    s.name: s
    for s in (
        Strategy(
            "ddp",
            "torch",
            "DistributedDataParallel",
            "per_replica",
            ("cpu", "cuda"),
            ("eager",),
            "per-process batch (each rank feeds its own per-replica batch)",
        ),
        Strategy(
            "dp",
            "torch",
            "DataParallel",
            "one",
            ("cuda",),
            ("eager",),
            "global batch, split across the devices by DataParallel",
        ),
        Strategy(
            "mirrored",
            "tensorflow",
            "MirroredStrategy",
            "one",
            ("cuda",),
            ("graph",),
            "global batch (tf.distribute), fed as per-replica values; loss / replicas",
        ),
        Strategy(
            "multiworker",
            "tensorflow",
            "MultiWorkerMirroredStrategy",
            "per_replica",
            ("cpu", "cuda"),
            ("graph",),
            "global batch (tf.distribute), fed as per-replica values; loss / replicas",
        ),
    )
}


def strategies_of(framework: str) -> list[str]:
    return [s.name for s in STRATEGIES.values() if s.framework == framework]


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
    found = STRATEGIES.get(strategy)
    if found is None:
        raise ValueError(
            f"strategy: unknown strategy {strategy!r}; valid choices: {', '.join(STRATEGIES)}"
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
    if task != "train":
        raise ValueError(f"task: strategy {strategy} benchmarks training; valid choices: train")
