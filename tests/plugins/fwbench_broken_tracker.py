"""Trackers that fail on purpose, loaded through FWBENCH_PLUGINS by the tests: a failing
tracker must cost its own figure, never the measured case."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from fwbench.measure.trackers import DriverTracker, TrackerInfo, WorkerTracker, register_tracker


class Nothing(BaseModel):
    pass


class BrokenInWorker(WorkerTracker):
    def stop(self, workload: Any) -> None:
        raise RuntimeError("worker-side tracker broke")


class BrokenInDriver(DriverTracker):
    def after_block(self, token: Any, wall_s: float, steps: int) -> None:
        raise RuntimeError("driver-side tracker broke")


register_tracker(TrackerInfo("broken-worker", "worker", BrokenInWorker, model=Nothing))
register_tracker(TrackerInfo("broken-driver", "driver", BrokenInDriver, model=Nothing))
