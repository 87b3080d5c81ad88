"""Energy counters read around each timed block, from the launcher's side.

CPU: RAPL package counters (/sys/class/powercap/intel-rapl:N/energy_uj). GPU: NVML's
total-energy counter (Volta and newer). Nothing is estimated: where no counter can be
read, energy is recorded as unavailable with the reason. The NVML path is written to the
documented API and verified on CPU-only machines only.
"""

from __future__ import annotations

import glob
from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

# A window shorter than this reads too few counter updates (NVML refreshes its energy
# counter every few tens of ms; RAPL about every ms): measuring is extended to it.
MIN_ENERGY_WINDOW_S = 1.0


class EnergyCounter(ABC):
    source: str

    @abstractmethod
    def read_joules(self) -> float:
        """A monotonic reading in joules (differences are what matter)."""


class RaplCounter(EnergyCounter):
    source = "RAPL package energy (powercap)"

    def __init__(self, zones: list[Path]) -> None:
        self.zones = zones
        self.ranges = [int((z / "max_energy_range_uj").read_text()) for z in zones]
        self.last = [0] * len(zones)
        self.wraps = [0] * len(zones)

    def read_joules(self) -> float:
        total = 0.0
        for i, zone in enumerate(self.zones):
            uj = int((zone / "energy_uj").read_text())
            if uj < self.last[i]:  # the counter wrapped around
                self.wraps[i] += 1
            self.last[i] = uj
            total += (uj + self.wraps[i] * self.ranges[i]) / 1e6
        return total


class NvmlCounter(EnergyCounter):
    source = "NVML total energy consumption"

    def __init__(self, nvml: Any, handles: list[Any]) -> None:
        self.nvml = nvml
        self.handles = handles

    def read_joules(self) -> float:
        return (
            float(sum(self.nvml.nvmlDeviceGetTotalEnergyConsumption(h) for h in self.handles)) / 1e3
        )


def _rapl() -> tuple[EnergyCounter | None, str | None]:
    zones = [Path(p) for p in sorted(glob.glob("/sys/class/powercap/intel-rapl:[0-9]"))]
    if not zones:
        return None, (
            "CPU energy unavailable: no RAPL counters under /sys/class/powercap "
            "(a virtual machine, a non-Intel/AMD CPU, or the intel_rapl driver not loaded)"
        )
    try:
        counter = RaplCounter(zones)
        counter.read_joules()
    except (OSError, ValueError) as exc:
        return None, f"CPU energy unavailable: RAPL counters not readable ({exc})"
    return counter, None


def _nvml() -> tuple[EnergyCounter | None, str | None]:
    from fwbench.measure.nvml import open_first_visible

    nvml, handle, reason = open_first_visible()
    if handle is None:
        return None, f"GPU energy unavailable: {reason}"
    try:
        counter = NvmlCounter(nvml, [handle])
        counter.read_joules()
    except Exception as exc:
        return None, f"GPU energy unavailable: NVML energy counter not readable ({exc})"
    return counter, None


def counters_for(device: str) -> tuple[list[EnergyCounter], list[str]]:
    """The counters that can measure a case on `device`, and why others cannot."""
    found, reasons = [], []
    # One source per device, so a figure is never the sum of two different meters.
    for probe in (_nvml,) if device == "cuda" else (_rapl,):
        counter, reason = probe()
        if counter is not None:
            found.append(counter)
        if reason:
            reasons.append(reason)
    return found, reasons


@dataclass
class EnergyAccumulator:
    """Sums counter differences over the timed blocks of one runner."""

    counters: list[EnergyCounter]
    joules: float = 0.0
    window_s: float = 0.0
    steps: int = 0

    def start(self) -> list[float]:
        return [c.read_joules() for c in self.counters]

    def stop(self, started: list[float], window_s: float, steps: int) -> None:
        self.joules += sum(c.read_joules() - s for c, s in zip(self.counters, started, strict=True))
        self.window_s += window_s
        self.steps += steps

    def take(self, other: EnergyAccumulator) -> None:
        """Add `other`'s sums to these (a kept run's, to the case's)."""
        self.joules += other.joules
        self.window_s += other.window_s
        self.steps += other.steps


class Energy(BaseModel):
    """Energy of a case's steady state, or why it could not be measured (stored as is)."""

    model_config = ConfigDict(frozen=True)

    status: Literal["measured", "unavailable"]
    reason: str | None = None
    source: str | None = None
    joules_per_step: float | None = None
    joules_per_sample: float | None = None
    average_power_w: float | None = None
    window_s: float | None = None


def summarise(acc: EnergyAccumulator | None, reasons: list[str], batch_size: int) -> Energy:
    if acc is None or not acc.counters:
        return Energy(status="unavailable", reason="; ".join(reasons) or "no energy counter")
    if acc.window_s < MIN_ENERGY_WINDOW_S or acc.steps == 0:
        return Energy(
            status="unavailable",
            reason=f"energy window {acc.window_s:.2f} s too short for the counter",
        )
    if acc.joules <= 0:
        return Energy(
            status="unavailable",
            reason=f"the energy counter did not advance over {acc.window_s:.2f} s of steps "
            f"({' + '.join(c.source for c in acc.counters)}): it reads another device, "
            "or does not count on this one",
        )
    per_step = acc.joules / acc.steps
    return Energy(
        status="measured",
        source=" + ".join(c.source for c in acc.counters),
        joules_per_step=per_step,
        joules_per_sample=per_step / batch_size,
        average_power_w=acc.joules / acc.window_s,
        window_s=acc.window_s,
    )
