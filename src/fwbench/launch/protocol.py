"""What the launcher sends a worker and what the worker writes back (JSON files).

Kept apart from the worker so the launcher can build requests without importing it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from fwbench.case import Case
from fwbench.measure.timing import TimingConfig
from fwbench.result import Status


class CaseRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["case"] = "case"
    case: Case
    timing: TimingConfig


class CountItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    model: str
    input_size: int
    num_classes: int


class CountRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    kind: Literal["count"] = "count"
    framework: str
    items: tuple[CountItem, ...]


class CaseReport(BaseModel):
    """The worker's account of one case. `timing` is a fwbench.measure.timing.Timing."""

    status: Status
    error: str | None = None
    build_s: float | None = None
    timing: dict[str, Any] | None = None
    param_count: int | None = None
    environment: dict[str, Any] = {}
    settings: dict[str, Any] = {}


class CountReport(BaseModel):
    counts: list[int | None]
    errors: list[str | None]
    framework_version: str | None = None
