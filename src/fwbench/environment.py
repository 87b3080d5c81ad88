"""The host side of a run's environment, captured without importing any framework.

Framework versions, library builds and device names come from the worker (each adapter's
`environment()`), because only the worker may import a framework.
"""

from __future__ import annotations

import platform
import shutil
import socket
import subprocess
from importlib import metadata
from typing import Any

import psutil

from fwbench.catalog.frameworks import FRAMEWORKS


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# The CPU features that decide which low-precision kernels a framework has on this CPU
# (oneDNN's fp16 and bf16 paths, AMX tiles, VNNI dot products).
CPU_FEATURES = (
    "avx2",
    "avx512f",
    "avx512_bf16",
    "avx512_fp16",
    "avx512_vnni",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
    "amx_int8",
)


def cpu_features(flags: str | None = None) -> list[str]:
    """Which of CPU_FEATURES this CPU has (from /proc/cpuinfo; empty where unreadable)."""
    if flags is None:
        try:
            with open("/proc/cpuinfo") as f:
                flags = next((ln.split(":", 1)[1] for ln in f if ln.startswith("flags")), "")
        except OSError:
            flags = ""
    have = set(flags.split())
    return [feature for feature in CPU_FEATURES if feature in have]


def cpu_features_text() -> str:
    have = cpu_features()
    missing = [f for f in ("avx512_bf16", "avx512_fp16", "amx_bf16", "amx_fp16") if f not in have]
    has = ", ".join(have) or "none of " + ", ".join(CPU_FEATURES)
    return f"has {has}; lacks {', '.join(missing) or 'none of the low-precision features'}"


def gpus() -> list[dict[str, str]]:
    """GPUs as nvidia-smi reports them; empty where there is none (verified: CPU only)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    rows = [[c.strip() for c in line.split(",")] for line in out.strip().splitlines()]
    return [{"name": r[0], "driver": r[1], "memory": r[2]} for r in rows if len(r) == 3]


def host_environment() -> dict[str, Any]:
    freq = psutil.cpu_freq()
    return {
        "hostname": socket.gethostname(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "fwbench": metadata.version("fwbench"),
        "cpu_model": cpu_model(),
        "cpu_features": cpu_features(),
        "cpu_physical_cores": psutil.cpu_count(logical=False),
        "cpu_logical_cores": psutil.cpu_count(logical=True),
        "cpu_max_mhz": round(freq.max) if freq and freq.max else None,
        "memory_total_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "gpus": gpus(),
        "frameworks": {name: info.version() for name, info in FRAMEWORKS.items()},
    }


def host_key(host: dict[str, Any]) -> str:
    """Which machine a peak belongs to: results from it are compared with it."""
    return f"{host.get('hostname')}|{host.get('cpu_model')}|{host.get('cpu_logical_cores')}"
