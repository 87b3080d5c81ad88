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

from fwbench.frameworks.registry import FRAMEWORKS


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


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
