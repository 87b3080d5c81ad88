"""GPU memory in use, sampled through NVML from the launcher (outside the timed process).

The allocators' own peaks (torch max_memory_allocated, TensorFlow get_memory_info) miss
what the framework holds outside them (CUDA context, cuDNN workspaces, fragmentation);
NVML sees the whole device. Written to NVML's documented API; verified on CPU-only
machines only, where it reports itself unavailable.
"""

from __future__ import annotations

import os
import threading
from typing import Any

SAMPLE_PERIOD_S = 0.02


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
        try:
            import pynvml

            pynvml.nvmlInit()
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
            index = int(visible.split(",")[0]) if visible[:1].isdigit() else 0
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except Exception as exc:
            self.reason = f"NVML unavailable ({type(exc).__name__}: {exc})"

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
