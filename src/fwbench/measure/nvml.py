"""NVML: which physical GPU a case runs on, and its used memory sampled from the launcher.

The allocators' own peaks (torch max_memory_allocated, TensorFlow get_memory_info) miss
what the framework holds outside them (CUDA context, cuDNN workspaces, fragmentation);
NVML sees the whole device.

NVML numbers devices in PCI bus order; CUDA numbers them fastest first unless
`CUDA_DEVICE_ORDER=PCI_BUS_ID`, which the launcher sets for every GPU worker
(`fwbench.launch.process.worker_env`), so an index in `CUDA_VISIBLE_DEVICES` names the same
device in both. Entries may also be UUIDs (`GPU-...`, as Ray and Slurm often set them),
or prefixes of one, as CUDA accepts.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any

SAMPLE_PERIOD_S = 0.02

_ENTRY = re.compile(r"^(\d+|(GPU|MIG)-[0-9A-Fa-f-]+)$")


def parse_visible_devices(value: str | None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None when unset (every device), else the
    entries up to the first one CUDA would reject (it ignores that one and the rest)."""
    if value is None:
        return None
    entries = []
    for raw in value.split(","):
        entry = raw.strip()
        if not _ENTRY.match(entry):
            break
        entries.append(entry)
    return entries


def first_visible_handle(nvml: Any, visible: str | None) -> tuple[Any, str | None]:
    """NVML's handle of the device CUDA calls `cuda:0` under `visible`, or the reason
    there is none."""
    entries = parse_visible_devices(visible)
    if entries is None:
        return nvml.nvmlDeviceGetHandleByIndex(0), None
    if not entries:
        return None, f"CUDA_VISIBLE_DEVICES={visible!r} leaves no GPU visible"
    first = entries[0]
    if first.isdigit():
        return nvml.nvmlDeviceGetHandleByIndex(int(first)), None
    if first.startswith("MIG-"):
        return None, f"{first} is a MIG instance: NVML reads memory and energy per GPU only"
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        uuid = nvml.nvmlDeviceGetUUID(handle)
        uuid = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        if uuid.startswith(first):  # CUDA accepts any unique prefix of a UUID
            return handle, None
    return None, f"no GPU has a UUID starting {first!r} (CUDA_VISIBLE_DEVICES)"


def open_first_visible() -> tuple[Any, Any, str | None]:
    """(pynvml, handle, None), or (None, None, the reason NVML cannot be read)."""
    try:
        import pynvml
    except ImportError:
        return None, None, "nvidia-ml-py is not installed (extra 'energy')"
    try:
        pynvml.nvmlInit()
        handle, reason = first_visible_handle(pynvml, os.environ.get("CUDA_VISIBLE_DEVICES"))
    except Exception as exc:
        return None, None, f"NVML unavailable ({type(exc).__name__}: {exc})"
    return (pynvml, handle, None) if handle is not None else (None, None, reason)


class NvmlMemorySampler:
    """Context manager: samples used device memory; `peak_bytes` is None without NVML."""

    def __init__(self, device: str) -> None:
        self.peak_bytes: int | None = None
        self.reason: str | None = None
        self._handle: Any = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if device != "cuda":
            self.reason = "not a GPU case"
            return
        self._nvml, self._handle, self.reason = open_first_visible()

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD_S):
            used = int(self._nvml.nvmlDeviceGetMemoryInfo(self._handle).used)
            self.peak_bytes = max(self.peak_bytes or 0, used)

    def __enter__(self) -> NvmlMemorySampler:
        if self._handle is not None:
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
