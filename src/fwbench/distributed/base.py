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
