"""Cases: one frozen, validated benchmark configuration, and its identity.

A Case says *what* is measured. How long and how precisely it is measured lives in
`fwbench.measure.timing.TimingConfig`, so changing the precision target never changes a
case's identity (and `--resume` still recognises it).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Literal

import psutil
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from fwbench.errors import SpecError
from fwbench.frameworks.registry import FRAMEWORKS
from fwbench.models.registry import get_model

Task = Literal["train", "infer"]
Device = Literal["cpu", "cuda"]

TASKS: tuple[str, ...] = ("train", "infer")
DEVICES: tuple[str, ...] = ("cpu", "cuda")
MAX_BATCH_SIZE = 1 << 24
MAX_INPUT_SIZE = 8192


def default_threads() -> int:
    """Physical cores: hyper-threads rarely help dense kernels and add noise."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


class Case(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    framework: str
    model: str
    task: Task = "train"
    batch_size: int = Field(32, ge=1, le=MAX_BATCH_SIZE)
    input_size: int = Field(224, ge=1, le=MAX_INPUT_SIZE)
    num_classes: int = Field(1000, ge=2, le=1_000_000)
    device: Device = "cpu"
    mode: str = "eager"
    # Intra-op and inter-op threads, set equally for every framework (METHODOLOGY rule 9).
    threads: int = Field(default_factory=default_threads, ge=1, le=1024)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("model"), str):
            data = {**data, "model": data["model"].lower()}
        return data

    @model_validator(mode="after")
    def _check(self) -> Case:
        if self.framework not in FRAMEWORKS:
            raise ValueError(
                f"framework: unknown framework {self.framework!r}; "
                f"valid choices: {', '.join(FRAMEWORKS)}"
            )
        info = FRAMEWORKS[self.framework]
        if self.mode not in info.modes:
            raise ValueError(
                f"mode: {info.label} has no {self.mode!r} mode; "
                f"valid choices for {self.framework}: {', '.join(info.modes)}"
            )
        if self.device not in info.devices:
            raise ValueError(
                f"device: {info.label} cannot run on {self.device!r}; "
                f"valid choices: {', '.join(info.devices)}"
            )
        try:
            spec = get_model(self.model)
        except SpecError as exc:
            raise ValueError(f"model: {exc}") from None
        spec.builder(self.framework)
        if self.input_size < spec.min_input_size:
            raise ValueError(
                f"input_size: {self.input_size} is too small for {spec.name}; "
                f"valid sizes are {spec.min_input_size} to {MAX_INPUT_SIZE}"
            )
        return self

    @classmethod
    def build(cls, **fields: Any) -> Case:
        """Validate `fields` into a Case, or raise a one-line SpecError."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise SpecError(validation_message(exc)) from None

    def key(self) -> str:
        """Stable identity of the case: the same fields give the same key on any machine."""
        canonical = json.dumps(self.model_dump(), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def workload_key(self) -> tuple[Any, ...]:
        """Everything but the framework and its mode: cases with one key do the same work."""
        return (
            self.model,
            self.task,
            self.batch_size,
            self.input_size,
            self.num_classes,
            self.device,
            self.threads,
        )

    @property
    def variant(self) -> str:
        return f"{self.framework}/{self.mode}"

    def label(self) -> str:
        return (
            f"{self.variant} {self.model} {self.task} b{self.batch_size} "
            f"{self.input_size}px {self.device} t{self.threads}"
        )


def validation_message(exc: ValidationError) -> str:
    """Turn pydantic's multi-line report into one line naming the key and the problem."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{loc}: invalid value {err.get('input')!r}; valid choices: {expected}"
    if err["type"] == "extra_forbidden":
        return f"unknown key {loc!r}"
    if loc and not msg.startswith(f"{loc}:"):
        return f"{loc}: {msg} (got {err.get('input')!r})"
    return msg
