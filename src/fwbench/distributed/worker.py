"""One rank of a data-parallel case (see fwbench/launch/rank_group.py for the protocol's shape).

Run as `python -m fwbench.distributed.worker LABEL`, by torchrun or by the launcher,
with FWBENCH_LAUNCHER=host:port to connect back to and RANK / WORLD_SIZE (torchrun's
variables; the launcher sets them for TensorFlow workers too). A rank speaks the case
worker's protocol (fwbench.launch.protocol) through the same loop
(fwbench.launch.worker.serve_case), over a socket since torchrun owns its stdin and
stdout; every rank runs every command, so collectives always have all their peers.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
import traceback
from typing import Any, Protocol

from fwbench.catalog.frameworks import get_framework
from fwbench.catalog.strategies import get_strategy
from fwbench.distributed import comm
from fwbench.distributed.base import DistributedWorkload
from fwbench.errors import one_line
from fwbench.explain import breakdown
from fwbench.explain.categories import Categoriser
from fwbench.explain.timeline import Window
from fwbench.frameworks.base import Adapter, Workload
from fwbench.launch.protocol import CaseRequest
from fwbench.launch.rank_group import LAUNCHER_ENV
from fwbench.launch.worker import Role, serve_case
from fwbench.lifetime import die_with_parent

# Steps profiled after the measurement to read communication time (never timed).
COMM_PROFILE_STEPS = 3


class _Module(Protocol):
    def unsupported_reason(self, case: Any) -> str | None: ...

    def build(self, adapter: Adapter, case: Any, rank: int, world: int) -> DistributedWorkload: ...


def _module(framework: str) -> _Module:
    path = get_framework(framework).data_parallel
    if path is None:
        raise ValueError(f"{framework} has no data-parallel strategies")
    module: _Module = importlib.import_module(path)
    return module


class Rank(Role):
    """A rank of a data-parallel case: builds its replica through the framework's
    data-parallel module, and after the timed blocks profiles communication (every rank
    profiles: its peers' collectives need it stepping)."""

    def __init__(self, request: CaseRequest, adapter: Adapter, rank: int, world: int) -> None:
        super().__init__(request, adapter)
        case = request.case
        strategy = get_strategy(str(case.strategy))
        assert strategy is not None  # the case was validated
        self.rank, self.world = rank, world
        self.module = _module(case.framework)
        self._info: dict[str, Any] = {
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

    def unsupported_reason(self) -> str | None:
        return self.module.unsupported_reason(self.request.case)

    def info(self) -> dict[str, Any]:
        return self._info

    def build(self) -> DistributedWorkload:
        workload = self.module.build(self.adapter, self.request.case, self.rank, self.world)
        self._info |= workload.describe()
        return workload

    def after(self, workload: Workload) -> dict[str, Any]:
        self._info["communication"], found = _communication(
            self.adapter, workload, self.request, self.rank
        )
        return {"breakdown": found}

    def close(self, workload: Workload) -> None:
        assert isinstance(workload, DistributedWorkload)
        workload.close()


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
    found = comm.summarise(profiler, events, Window.of(window).span, steps, categorise)
    full = None
    if request.profile_steps:
        built = breakdown.build(profiler, events, window, steps, categorise, trace)
        full = built.model_dump()
    return found, full


def main() -> int:
    die_with_parent()
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
    serve_case(request, send, commands, lambda req, adapter: Rank(req, adapter, rank, world))
    # Stay until the launcher has every rank's report and closes the connection: a rank
    # that left earlier would take its side of the collectives with it while a peer
    # still writes its report (a TensorFlow worker whose coordination leader is gone
    # aborts).
    for _ in commands:
        pass
    sock.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
