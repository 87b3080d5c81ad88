"""What a data-parallel workload adds to a Workload."""

from __future__ import annotations

from typing import Any

from fwbench.frameworks.base import Workload


class DistributedWorkload(Workload):
    """A Workload that also describes its set-up and leaves its process group cleanly."""

    def describe(self) -> dict[str, Any]:
        """Backend, launcher and similar facts, recorded with the result."""
        return {}

    def close(self) -> None:
        """Tear down what the build set up (a process group); called on every rank."""


def split_cpu(replicas: int, devices: str, how: str) -> str:
    """The record's words for replicas on devices split from one CPU (MirroredStrategy's
    logical devices, XLA's host devices): they add no compute."""
    return (
        f"{replicas} {devices} split from one CPU ({how}): the replicas share the "
        "process's threads and cores"
    )
