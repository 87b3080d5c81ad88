"""A tracker added in one module, loaded through FWBENCH_PLUGINS by the tests: it counts
the timed blocks and steps a worker ran in the steady state, and the blocks the driver
saw, with its own record model (the record has no field for it: Result.tracked)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fwbench.measure.trackers import DriverTracker, TrackerInfo, WorkerTracker, register_tracker


class Blocks(BaseModel):
    blocks: int
    steps: int


class WorkerBlocks(WorkerTracker):
    def start(self) -> None:
        self.blocks = self.steps = 0

    def block(self, seconds: float, steps: int) -> None:
        self.blocks += 1
        self.steps += steps

    def stop(self, workload: Any) -> dict[str, int]:
        return {"blocks": self.blocks, "steps": self.steps}


class DriverBlocks(DriverTracker):
    blocks = steps = 0

    def after_block(self, token: Any, wall_s: float, steps: int) -> None:
        self.blocks += 1
        self.steps += steps

    def result(self) -> dict[str, int]:
        return {"blocks": self.blocks, "steps": self.steps}


register_tracker(TrackerInfo("toy-worker-blocks", "worker", WorkerBlocks, model=Blocks))
register_tracker(TrackerInfo("toy-driver-blocks", "driver", DriverBlocks, model=Blocks))
