"""Run case groups as Ray tasks: a sweep spread over the nodes of a Ray cluster.

Each group (one case, or the interleaved variants of one workload) is one Ray task that
runs `local.run_group` on the node it lands on: the fresh worker process per case, the
time-outs and the crash classification are the local executor's, unchanged. The driver
stores each group's results as soon as its task returns, so a stopped driver loses only
the cases in flight and `--resume` skips the rest.

One case per device. Ray counts resources, it does not isolate them, so the policy is
written as resource demands (see `demand`):

- a CPU case takes the whole of its node's `fwbench_host` resource (1 per node): no other
  case, CPU or CUDA, measures on that node meanwhile — they would share cores, caches,
  memory bandwidth and the package-wide RAPL energy counter;
- a CUDA case takes one GPU (Ray sets CUDA_VISIBLE_DEVICES, which the NVML trackers
  follow) and a sliver of `fwbench_host`: CUDA cases on different GPUs of one node run
  side by side, but never beside a CPU case;
- every case also takes `threads` CPUs, so the host threads of the cases on a node never
  add up to more than its cores.

A task whose Ray worker process or node dies is re-queued by Ray (`max_retries`); the
case then runs again from the start on whichever node has room, and is recorded once,
when a task returns. An exception inside fwbench is not retried: it would happen again.

Ray itself is imported only here, and only when this executor runs: `import fwbench`
never loads it, and without it installed only `--executor ray` fails, with one line.
"""

from __future__ import annotations

import contextlib
import logging
import socket
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fwbench.case import Case
from fwbench.environment import host_environment
from fwbench.errors import ExecutorError
from fwbench.launch import local, outcome
from fwbench.launch.executor import GroupDone, OnStart, OnStatus
from fwbench.launch.protocol import GroupRequest, ServeRequest

HOST_RESOURCE = "fwbench_host"
# A CUDA case's share of its node's host: small enough that every GPU of a node can have
# a case, non-zero so that a CPU case (which needs all of it) waits for them all.
CUDA_HOST_SHARE = 0.001
DEFAULT_MAX_RETRIES = 3
INSTALL_HINT = "pip install 'fwbench[ray]'"
# How often the driver wakes while waiting for results, so Ctrl-C is seen promptly.
_WAIT_S = 1.0


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError:
        raise ExecutorError(f"the Ray executor needs Ray: {INSTALL_HINT}") from None
    return ray


def ray_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("ray") is not None


@dataclass(frozen=True)
class Demand:
    """What one group's task asks of the node it runs on."""

    num_cpus: int
    num_gpus: int
    host_share: float

    def resources(self) -> dict[str, float]:
        return {HOST_RESOURCE: self.host_share}

    def describe(self) -> str:
        gpus = f", {self.num_gpus} GPU" if self.num_gpus else ""
        return f"{self.num_cpus} CPU{gpus}, {self.host_share:g} {HOST_RESOURCE}"


def demand(cases: Sequence[Case]) -> Demand:
    """The resources of a group: its cases share device and threads, and alternate on it."""
    threads = max(c.threads for c in cases)
    if any(c.device == "cuda" for c in cases):
        return Demand(num_cpus=threads, num_gpus=1, host_share=CUDA_HOST_SHARE)
    return Demand(num_cpus=threads, num_gpus=0, host_share=1.0)


def unmet(need: Demand, label: str, nodes: Sequence[Mapping[str, float]]) -> str | None:
    """Why no node (given as its total resources) can ever run this task, or None.

    Ray would queue such a task forever; the sweep fails before it starts instead.
    """
    if not any(HOST_RESOURCE in n for n in nodes):
        return (
            f"no node of the Ray cluster offers the {HOST_RESOURCE!r} resource that keeps one "
            f"case per device; start each node with "
            f"`ray start ... --resources='{{\"{HOST_RESOURCE}\": 1}}'`"
        )
    for node in nodes:
        if (
            node.get("CPU", 0) >= need.num_cpus
            and node.get("GPU", 0) >= need.num_gpus
            and node.get(HOST_RESOURCE, 0) >= need.host_share
        ):
            return None
    largest = max(nodes, key=lambda n: (n.get("GPU", 0), n.get("CPU", 0)))
    return (
        f"{label} needs {need.describe()} on one node, more than any node of the Ray "
        f"cluster has (largest: {largest.get('CPU', 0):g} CPU, {largest.get('GPU', 0):g} GPU)"
    )


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail in seconds on a wrong HOST:PORT: Ray itself retries a dead address for
    minutes. "auto" and other non-address forms are Ray's to resolve."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ExecutorError(f"cannot reach the Ray cluster at {address!r}: {reason}") from None


# Ray's workers start in seconds; when they cannot (an object store that cannot mmap under
# a memory limit, say) Ray queues tasks forever without a word.
WORKER_START_TIMEOUT_S = 60.0


def _ping() -> bool:
    return True


def _check_workers_start(ray: ModuleType) -> None:
    ref = ray.remote(num_cpus=0)(_ping).remote()
    try:
        ray.get(ref, timeout=WORKER_START_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        with contextlib.suppress(Exception):
            ray.cancel(ref, force=True)
        raise ExecutorError(
            f"Ray started, but none of its workers ran a task within "
            f"{WORKER_START_TIMEOUT_S:g} s (see Ray's logs under /tmp/ray: often its object "
            "store cannot allocate memory under a limit)"
        ) from None
    except ray.exceptions.RayError as exc:
        raise ExecutorError(f"Ray's workers cannot run a task: {_first_line(exc)}") from None


@dataclass(frozen=True)
class NodeDone:
    """What a task sends back: picklable, and small next to a result's samples."""

    outcomes: list[outcome.Outcome]
    host: dict[str, Any]


# Why serving points stay on the machine that serves them.
SERVING_REFUSED = (
    "serving points run on this machine only (not on Ray): each run writes LoadGen's "
    "logs beside the results database, which a Ray node cannot reach; use --executor local"
)


def run_on_node(requests: list[GroupRequest], timeout_s: float) -> NodeDone:
    """The body of a Ray task. Module-level, so Ray sends it by name, not by value: each
    node runs the fwbench installed there, which must be the driver's version."""
    return NodeDone(local.run_group(requests, timeout_s), host_environment())


@dataclass(frozen=True)
class RayExecutor:
    """A Ray cluster at `address` ("auto": the one this machine belongs to), or a Ray
    instance started on this machine when `address` is None."""

    address: str | None = None
    max_retries: int = DEFAULT_MAX_RETRIES

    @contextlib.contextmanager
    def connect(self) -> Iterator[None]:
        ray = import_ray()
        if ray.is_initialized():
            # The caller (a test, a notebook) holds the connection and keeps it.
            yield
            return
        # Ray's INFO lines and task logs would tear through the progress bar; every
        # worker's own log is kept with its result, as in a local sweep.
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
        try:
            if self.address is None:
                ray.init(
                    address="local",  # not $RAY_ADDRESS: None means this machine, always
                    resources={HOST_RESOURCE: 1},
                    include_dashboard=False,
                    **quiet,
                )
            else:
                _check_reachable(self.address)
                ray.init(address=self.address, **quiet)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            where = "a local Ray instance" if self.address is None else repr(self.address)
            raise ExecutorError(
                f"cannot start or join Ray at {where}: {_first_line(exc)}"
            ) from None
        try:
            _check_workers_start(ray)
            yield
        finally:
            ray.shutdown()

    def check(self, groups: Sequence[Sequence[GroupRequest]]) -> None:
        """Before any work (parameter counting included): every group fits some node,
        and none is a serving point."""
        if any(isinstance(r.sent, ServeRequest) for group in groups for r in group):
            raise ExecutorError(SERVING_REFUSED)
        ray = import_ray()
        nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
        for group in groups:
            problem = unmet(demand([r.case for r in group]), group[0].case.label(), nodes)
            if problem:
                raise ExecutorError(problem)

    def run(
        self,
        groups: Sequence[Sequence[GroupRequest]],
        timeout_s: float,
        on_start: OnStart | None = None,
        on_status: OnStatus | None = None,
    ) -> Iterator[GroupDone]:
        # Ray does not say when a queued task starts, so on_start is not called; the
        # status line counts what is in flight instead.
        ray = import_ray()
        self.check(groups)
        needs = [demand([r.case for r in group]) for group in groups]
        task = ray.remote(run_on_node)
        pending: dict[Any, int] = {}
        for index, (need, group) in enumerate(zip(needs, groups, strict=True)):
            ref = task.options(
                num_cpus=need.num_cpus,
                num_gpus=need.num_gpus,
                resources=need.resources(),
                max_retries=self.max_retries,
                retry_exceptions=False,
                name=f"fwbench {group[0].case.label()}",
            ).remote(list(group), timeout_s)
            pending[ref] = index
        try:
            while pending:
                if on_status:
                    on_status(f"on Ray: {len(pending)} of {len(groups)} tasks queued or running")
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=_WAIT_S)
                for ref in ready:
                    index = pending.pop(ref)
                    yield self._collect(ray, ref, index, groups[index])
        finally:
            # A driver stopped early (Ctrl-C, an error) takes its unfinished cases with it.
            for ref in pending:
                with contextlib.suppress(Exception):
                    ray.cancel(ref, force=True)

    def _collect(
        self, ray: ModuleType, ref: Any, index: int, group: Sequence[GroupRequest]
    ) -> GroupDone:
        try:
            done: NodeDone = ray.get(ref)
        except ray.exceptions.OutOfMemoryError as exc:
            # Ray's memory monitor killed the task: the case does not fit the node, which
            # is what a local sweep records when the kernel's OOM killer strikes.
            failure = outcome.WorkerFailure(
                "oom", f"killed by Ray's memory monitor: {_first_line(exc)}", ""
            )
            killed = outcome.CaseOutcome(None, failure)
            return GroupDone(index, [killed for _ in group])
        except ray.exceptions.RayTaskError as exc:
            # fwbench itself raised on the node (not installed there, a bug): not retried.
            cause = getattr(exc, "cause", None)
            cause = cause if isinstance(cause, BaseException) else exc
            message = f"{type(cause).__name__}: {_first_line(cause)}"
            return GroupDone(index, lost=f"failed on its Ray node: {message}")
        except ray.exceptions.RayError as exc:
            tries = self.max_retries + 1
            attempts = f"{tries} attempts" if tries > 1 else "1 attempt (no retries)"
            return GroupDone(index, lost=f"lost on Ray after {attempts}: {_first_line(exc)}")
        return GroupDone(index, done.outcomes, done.host)


def _first_line(exc: BaseException) -> str:
    line = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
    return (line or type(exc).__name__)[:300]
