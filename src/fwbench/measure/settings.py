"""The settings of a measurement, split by who reads them.

A user names each setting by itself (a sweep file's `timing: {max_runs: 6, estimator:
p25}`, the flags of `run` and `sweep`); each belongs to the one part whose reader needs
it, and only that part goes where it is read:

- `run` (fwbench.measure.timing.RunTiming): how each run is timed, its warmup, blocks and
  their stop; sent to the worker (its `calibrate`) and read by the driver's blocks;
- `plan` (fwbench.measure.runs.RunPlan): how many runs a case gets and when they stop;
  read by the driver only;
- `reading` (fwbench.measure.verdicts.Reading): which value of each run verdicts read
  and the equivalence band; read by the driver's stopping rule and by every view.

A result records all three, typed (fwbench.result.Result.run_timing, run_plan, reading).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fwbench.measure.runs import RunPlan
from fwbench.measure.timing import RunTiming
from fwbench.measure.verdicts import Reading

# Each setting's part, by its flat name.
PARTS: dict[str, type[BaseModel]] = {"run": RunTiming, "plan": RunPlan, "reading": Reading}
PART_OF: dict[str, str] = {
    name: part for part, model in PARTS.items() for name in model.model_fields
}
assert len(PART_OF) == sum(len(m.model_fields) for m in PARTS.values()), "a setting in two parts"


def split(flat: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Settings by flat name -> by part; an unknown name is a ValueError naming the valid
    ones."""
    unknown = [k for k in flat if k not in PART_OF]
    if unknown:
        raise ValueError(
            f"unknown setting {', '.join(map(repr, unknown))}; valid settings: {', '.join(PART_OF)}"
        )
    parts: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        parts.setdefault(PART_OF[name], {})[name] = value
    return parts


class TimingConfig(BaseModel):
    """How a case is measured and read: `run`, `plan` and `reading` (the module's
    docstring). Built from its parts, or from flat settings (`TimingConfig(max_runs=6,
    estimator="median")`: each goes to its part). Not part of a case's identity."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    run: RunTiming = Field(default_factory=RunTiming)
    plan: RunPlan = Field(default_factory=RunPlan)
    reading: Reading = Field(default_factory=Reading)

    @model_validator(mode="before")
    @classmethod
    def _flat(cls, data: Any) -> Any:
        if not isinstance(data, dict) or all(k in PARTS for k in data):
            return data
        nested = [k for k in data if k in PARTS]
        if nested:
            raise ValueError(f"give settings by name or by part ({', '.join(nested)}), not both")
        return split(data)

    @classmethod
    def of(cls, **settings: Any) -> TimingConfig:
        """From settings by name, each to its part (a ValidationError names a bad one)."""
        return cls.model_validate(settings)

    def flat(self) -> dict[str, Any]:
        """Every setting by its own name (what a sweep file's `timing:` holds)."""
        return {**self.run.model_dump(), **self.plan.model_dump(), **self.reading.model_dump()}

    def replace(self, **settings: Any) -> TimingConfig:
        """These settings changed, by name, validated again."""
        return TimingConfig.model_validate(self.flat() | settings)
