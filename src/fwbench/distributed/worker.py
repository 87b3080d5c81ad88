"""One rank of a data-parallel case (see launch.py for the protocol's shape).

Run as `python -m fwbench.distributed.worker LABEL`, by torchrun or by the launcher,
with FWBENCH_LAUNCHER=host:port to connect back to and RANK / WORLD_SIZE (torchrun's
variables; the launcher sets them for TensorFlow workers too). The rank answers:
the CaseRequest with `built` (or a final `report`), then `block` (n synced steps),
`overhead` (the sync's cost), `steady` (start the memory window) and `finish` (the
final `report`, after profiling a few steps for communication time). Every rank runs
every command, so collectives always have all their peers.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, Protocol

from fwbench.distributed import comm
from fwbench.distributed.base import DistributedWorkload
from fwbench.distributed.launch import LAUNCHER_ENV
from fwbench.distributed.strategies import get_strategy
from fwbench.explain import breakdown
from fwbench.explain.categories import Categoriser
from fwbench.frameworks.base import Adapter, Workload
from fwbench.frameworks.registry import get_framework
from fwbench.launch.protocol import CaseReport, CaseRequest
from fwbench.launch.worker import (
    _die_with_parent,
    _thread_env,
    failure,
    memory_report,
    one_line,
)
from fwbench.measure.memory import HostMemoryTracker
from fwbench.measure.timing import run_block, sync_overhead
from fwbench.models.registry import get_model

# Steps profiled after the measurement to read communication time (never timed).
COMM_PROFILE_STEPS = 3

Send = Callable[[dict[str, Any]], None]


class _Module(Protocol):
    def unsupported_reason(self, case: Any) -> str | None: ...

    def build(self, adapter: Adapter, case: Any, rank: int, world: int) -> DistributedWorkload: ...


def _module(framework: str) -> _Module:
    path = get_framework(framework).data_parallel
    if path is None:
        raise ValueError(f"{framework} has no data-parallel strategies")
    module: _Module = importlib.import_module(path)
    return module


def serve(request: CaseRequest, rank: int, world: int, send: Send, commands: Any) -> None:
    case = request.case
    strategy = get_strategy(str(case.strategy))
    assert strategy is not None  # the case was validated
    adapter = get_framework(case.framework).load_adapter()
    settings = adapter.configure(case.device, case.threads) | {"env": _thread_env()}
    settings |= get_model(case.model).training()
    environment = adapter.environment(case.device)
    info: dict[str, Any] = {
        "strategy": strategy.name,
        "strategy_label": strategy.label,
        "world_size": case.replicas,
        "replicas": case.replicas,
        "processes": world,
        "per_replica_batch_size": case.batch_size,
        "global_batch_size": case.global_batch_size,
        "batch_semantics": strategy.batch_semantics,
        "threads_per_process": case.threads,
        "timed_rank": "slowest rank per block",
    }

    def report(**fields: Any) -> None:
        msg = CaseReport(environment=environment, settings=settings, distributed=info, **fields)
        send({"event": "report", "report": msg.model_dump()})

    module = _module(case.framework)
    reason = adapter.unavailable_reason(case.device) or module.unsupported_reason(case)
    if reason:
        report(status="unsupported", error=reason)
        return
    memory = HostMemoryTracker()
    memory.mark_baseline()
    param_count = None
    workload: DistributedWorkload | None = None
    try:
        start = time.perf_counter()
        workload = module.build(adapter, case, rank, world)
        build_s = time.perf_counter() - start
        param_count = workload.param_count
        info |= workload.describe()
        send({"event": "built"})
        for line in commands:
            message = json.loads(line)
            op = message["op"]
            if op == "block":
                seconds = run_block(
                    workload.step, workload.sync, message["steps"], time.perf_counter
                )
                send({"event": "block", "seconds": seconds})
            elif op == "overhead":
                send(
                    {
                        "event": "overhead",
                        "seconds": sync_overhead(workload.sync, time.perf_counter),
                    }
                )
            elif op == "steady":
                # The steady state starts here: peaks from build and warmup are forgotten.
                memory.start_window()
                adapter.reset_device_memory(case.device)
                send({"event": "steady"})
            else:
                break
        memory_fields = memory_report(memory, adapter, case.device)
        settings |= workload.counters()
        info["communication"], found = _communication(adapter, workload, request, rank)
    except Exception as exc:
        found = failure(adapter, exc, case.device, settings)
        report(**found, param_count=param_count)
        return
    finally:
        if workload is not None:
            workload.close()
    report(
        status="ok",
        build_s=build_s,
        param_count=param_count,
        memory=memory_fields,
        breakdown=found,
    )


def _communication(
    adapter: Adapter, workload: Workload, request: CaseRequest, rank: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Communication time per step from the framework's profiler, and the full
    breakdown when `fwbench explain` asked for one."""
    steps = request.profile_steps or COMM_PROFILE_STEPS
    categorise = Categoriser(list(request.category_rules))
    # Every rank profiles: its peers' collectives need it stepping. A profiler that
    # fails costs the communication figure, not the measured case.
    try:
        trace_path = request.trace_path if rank == 0 else None  # one trace file, rank 0's
        profiler, events, window, trace = adapter.profile(workload, steps, trace_path)
    except Exception as exc:
        traceback.print_exc()
        return {"profiled_steps": steps, "in_flight_s": None, "error": one_line(exc)}, None
    found = comm.summarise(profiler, events, window, steps, categorise)
    full = None
    if request.profile_steps:
        built = breakdown.build(profiler, events, window, steps, categorise, trace)
        full = built.model_dump()
    return found, full


def main() -> int:
    _die_with_parent()
    # Frameworks print to fd 1: that goes to the log; the protocol runs over a socket.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    host, port = os.environ[LAUNCHER_ENV].rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.settimeout(None)
    commands = sock.makefile("r", encoding="utf-8")

    def send(message: dict[str, Any]) -> None:
        sock.sendall(json.dumps(message).encode() + b"\n")

    send({"event": "hello", "rank": rank, "pid": os.getpid()})
    request = CaseRequest.model_validate_json(commands.readline())
    serve(request, rank, world, send, commands)
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
