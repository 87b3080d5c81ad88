"""The worker process: imports one framework and serves one request (see protocol.py).

Run as `python -m fwbench.launch.worker LABEL` (the label only shows in `ps`). Anything
that goes wrong inside the framework (out of memory, an exception) becomes a report
here; what kills the process (a segfault, a time-out) the launcher records.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TextIO

from pydantic import BaseModel, TypeAdapter

from fwbench.case import Case
from fwbench.catalog.frameworks import get_framework
from fwbench.catalog.models import LOSSES
from fwbench.errors import one_line
from fwbench.explain import breakdown
from fwbench.explain.categories import Categoriser
from fwbench.frameworks import load_adapter
from fwbench.frameworks.base import Adapter, TaskNotImplemented, Workload
from fwbench.launch import outputs
from fwbench.launch.protocol import (
    CaseReport,
    CaseRequest,
    CountItem,
    CountReport,
    CountRequest,
    PeakReport,
    PeakRequest,
    Request,
    ServeReport,
    ServeRequest,
)
from fwbench.lifetime import die_with_parent
from fwbench.measure import load, trackers
from fwbench.measure.timing import RunTiming, measure, prepare, run_block, sync_overhead
from fwbench.tasks.infer import INFER

Send = Callable[[dict[str, Any]], None]


def failure(
    adapter: Adapter, exc: BaseException, device: str, settings: dict[str, Any]
) -> dict[str, Any]:
    """A case's failure as its report says it: status (oom, unsupported by this hardware,
    or error) and the informative line. The traceback goes to the worker's log and its
    end to `settings["error_traceback"]`."""
    traceback.print_exception(exc)
    # Python's MemoryError is every framework's: a host allocation failed, or a model
    # refused before building one it knew would not fit (models.sources.hf.fits).
    status = "oom" if isinstance(exc, MemoryError) or adapter.is_oom(exc) else "error"
    error = one_line(exc)
    if isinstance(exc, TaskNotImplemented):
        return {"status": "unsupported", "error": error[:700]}
    if status == "error" and adapter.is_unsupported(exc):
        status = "unsupported"
        if context := adapter.unsupported_context(device):
            error += f" ({context})"
    trace = "".join(traceback.format_exception(exc)).splitlines()
    settings["error_traceback"] = "\n".join(trace[-40:])
    return {"status": status, "error": error[:700]}


# The environment variables a worker's numbers depend on: thread pools and their
# placement (OpenMP, MKL, oneDNN), the frameworks' and XLA's own switches, the visible
# GPUs. Recorded as the worker saw them (settings["env"]), with the CPUs it may run on.
# TensorFlow's by its own prefixes: other tools use TF_ too (Terraform's TF_VAR_ may hold
# secrets), and a results file is shared.
_RECORDED_ENV = (
    "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "DNNL_", "ONEDNN_", "XLA_", "JAX_",
    "KERAS_", "PYTORCH_", "TORCH_", "TORCHINDUCTOR_", "CUDA_", "CUBLAS_", "CUDNN_", "NCCL_",
    "TF_ENABLE_", "TF_XLA_", "TF_CUDNN_", "TF_GPU_", "TF_NUM_", "TF_INTRA_", "TF_INTER_",
    "TF_FORCE_", "TF_DETERMINISTIC", "TF_CPP_",
)  # fmt: skip
_SECRET = re.compile(r"TOKEN|SECRET|PASSWORD|KEY|CREDENTIAL", re.IGNORECASE)


def _thread_env() -> dict[str, str]:
    found = {
        k: v
        for k, v in sorted(os.environ.items())
        if k.startswith(_RECORDED_ENV) and not _SECRET.search(k)
    }
    if hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
        found["cpu_affinity"] = _ranges(cpus)
    return found


def _ranges(cpus: list[int]) -> str:
    """CPU numbers as Linux writes them: "0-3,8"."""
    parts: list[str] = []
    for cpu in cpus:
        if parts and parts[-1].split("-")[-1] == str(cpu - 1):
            parts[-1] = f"{parts[-1].split('-')[0]}-{cpu}"
        else:
            parts.append(str(cpu))
    return ",".join(parts)


class Role:
    """What one kind of case worker does around the shared measurement loop
    (`serve_case`). This one is a single process: it builds the case's workload, and
    after the timed blocks profiles when asked. A rank of a data-parallel case is the
    other kind (fwbench.distributed.worker.Rank)."""

    def __init__(self, request: CaseRequest, adapter: Adapter) -> None:
        self.request = request
        self.adapter = adapter

    def unsupported_reason(self) -> str | None:
        return None

    def info(self) -> dict[str, Any] | None:
        """Facts the report carries as `distributed` (None for a single process)."""
        return None

    def build(self) -> Workload:
        return self.adapter.build(self.request.case)

    def after(self, workload: Workload) -> dict[str, Any]:
        """Report fields from work done after the timed blocks and the trackers (never
        timed itself): a profile when `fwbench explain` asked for one."""
        request = self.request
        if not request.profile_steps:
            return {}
        return {"breakdown": _profile(self.adapter, workload, request)}

    def close(self, workload: Workload) -> None:
        return None


RoleOf = Callable[[CaseRequest, Adapter], Role]


def serve_case(
    request: CaseRequest, send: Send, commands: Iterable[str], role_of: RoleOf = Role
) -> None:
    """Build the case, then answer the driver's commands until `finish` (protocol.py):
    the timing rules come with `calibrate` and the driver decides when to stop, so one
    loop serves a single process and each rank of a data-parallel case alike."""
    case = request.case
    adapter = load_adapter(case.framework)
    # Compiled programs go to the cache every command shares (launch.rounds.compile_dir),
    # or, with --no-compile-cache, to this run's own folder (removed when it ends): never
    # to a framework's default, which every command on the machine shares unseen. Set
    # before the framework is configured: TensorFlow reads XLA's flags when its runtime
    # starts.
    kept = request.compile_cache or os.path.join(tempfile.gettempdir(), "compile-cache")
    cached = adapter.compile_cache(kept, case)
    settings = adapter.configure(case.device, case.threads) | {"env": _thread_env()}
    spec = case.model_spec
    settings |= {"loss": LOSSES[case.loss], "optimizer": spec.optimizer.describe()}
    if cached:
        scope = "between commands" if request.compile_cache else "this run only"
        settings |= cached | {"compile_cache_scope": scope}
    environment = adapter.environment(case.device)
    role = role_of(request, adapter)

    def report(**fields: Any) -> None:
        msg = CaseReport(
            environment=environment, settings=settings, distributed=role.info(), **fields
        )
        send({"event": "report", "report": msg.model_dump()})

    reason = adapter.unavailable_reason(case.device) or role.unsupported_reason()
    if reason:
        report(status="unsupported", error=reason)
        return
    tracking = trackers.worker_trackers(
        adapter, request, settings.setdefault("warnings", []).append
    )
    for tracker in tracking.values():
        tracker("baseline")
    param_count = None
    workload: Workload | None = None
    try:
        start = time.perf_counter()
        workload = role.build()
        build_s = time.perf_counter() - start
        param_count = workload.param_count
        built = dict(workload.settings())
        # Into the list the trackers append to (replacing it would lose their warnings).
        settings["warnings"].extend(built.pop("warnings", []))
        settings |= built
        send({"event": "built", "build_s": build_s})
        compiles_before = None
        steady = False
        for line in commands:
            message = json.loads(line)
            op = message["op"]
            if op == "block":
                if message.get("warm"):
                    # Another process ran since our last block: caches are cold and the
                    # pool's threads asleep, and the steps after a switch are slower
                    # (docs/methodology.md, "Blocks after a switch"). They are not timed.
                    run_block(workload.step, workload.sync, int(message["warm"]), time.perf_counter)
                steps = int(message["steps"])
                workload.figures()  # what warmup and the untimed steps timed is dropped
                seconds = run_block(workload.step, workload.sync, steps, time.perf_counter)
                figures = workload.figures()
                send({"event": "block", "seconds": seconds, "figures": figures})
                if steady:  # warmup's blocks are not the trackers' business
                    for tracker in tracking.values():
                        tracker("block", seconds, steps)
            elif op == "calibrate":
                # Warmup steps back to back, as a user's loop runs them: no round trip to
                # the driver between them (with spinning thread pools on every core, one
                # costs milliseconds of scheduling).
                config = RunTiming.model_validate(message["timing"])
                given = message.get("steps_per_block")
                prepared = prepare(workload.step, workload.sync, config, steps_per_block=given)
                send({"event": "calibrated", "prepared": dataclasses.asdict(prepared)})
            elif op == "overhead":
                seconds = sync_overhead(workload.sync, time.perf_counter)
                send({"event": "overhead", "seconds": seconds})
            elif op == "steady":
                # The steady state starts here: what build and warmup did is forgotten.
                steady = True
                compiles_before = workload.compile_count()
                for tracker in tracking.values():
                    tracker("start")
                send({"event": "steady"})
            else:
                break
        if compiles_before is not None:
            # A difference is a (re)compilation inside the timed blocks: flagged by the
            # driver, never silently averaged in.
            settings["compiles_after_warmup"] = compiles_before
            settings["compiles_after_timing"] = workload.compile_count()
        tracked = {name: tracker("stop", workload) for name, tracker in tracking.items()}
        settings |= workload.counters()
        found = _after_blocks(workload, role, adapter, request, settings)
    except Exception as exc:
        report(**failure(adapter, exc, case.device, settings), param_count=param_count)
        return
    finally:
        if workload is not None:
            role.close(workload)
    report(status="ok", build_s=build_s, param_count=param_count, tracked=tracked, **found)


def _after_blocks(
    workload: Workload, role: Role, adapter: Adapter, request: CaseRequest, settings: dict[str, Any]
) -> dict[str, Any]:
    """What is read after the timed blocks (the outputs, the compile cache's state, a
    profile): its report fields. A failure there never costs the run its blocks: it is
    a warning, and what failed is missing from the result."""
    try:
        sample = workload.output_sample()
        if sample is not None:
            settings["output_sample"] = sample
            whole = workload.output_arrays()
            if request.outputs_path and whole is not None:
                outputs.write(request.outputs_path, whole)
        settings |= adapter.compile_cache_state()
        return role.after(workload)
    except Exception as exc:
        settings["warnings"].append(
            f"after the timed blocks: {one_line(exc)} (the run's "
            "times are kept; what failed is missing from the result)"
        )
        return {}


def _profile(adapter: Adapter, workload: Workload, request: CaseRequest) -> dict[str, Any]:
    profiler, events, window, trace = adapter.profile(
        workload, request.profile_steps, request.trace_path
    )
    categorise = Categoriser(list(request.category_rules))
    found = breakdown.build(profiler, events, window, request.profile_steps, categorise, trace)
    return found.model_dump()


class _FlopsFailed(Exception):
    """FLOPs could not be counted; the parameters may have been (`params`)."""

    def __init__(self, params: int | None, error: str) -> None:
        super().__init__(error)
        self.params, self.error = params, error


def _count_with_flops(adapter: Adapter, framework: str, item: CountItem) -> tuple[int, float]:
    """Parameters and FLOPs of one inference step at batch 1, from one built workload;
    when that fails, the parameters from the model alone, and why FLOPs are missing."""
    try:
        case = Case.build(
            framework=framework, model=item.model, task=INFER.name, batch_size=1, **item.dims
        )
        workload = adapter.build(case)
        params = workload.param_count
    except Exception as exc:
        params = adapter.count_model(item.reference or item.model, item.dims)
        raise _FlopsFailed(params, one_line(exc)) from exc
    try:
        flops, _ = adapter.count_flops(workload)
    except Exception as exc:
        raise _FlopsFailed(params, one_line(exc)) from exc
    return params, flops


def run_count(request: CountRequest, started: Callable[[], None]) -> CountReport:
    info = get_framework(request.framework)
    adapter = load_adapter(info.name)
    started()
    counts: list[int | None] = []
    errors: list[str | None] = []
    flops: list[float | None] = []
    for item in request.items:
        counts.append(None)
        errors.append(None)
        flops.append(None)
        try:
            if item.flops:
                # One build for both where it can: the workload's model is the one counted.
                counts[-1], flops[-1] = _count_with_flops(adapter, request.framework, item)
            else:
                counts[-1] = adapter.count_model(item.reference or item.model, item.dims)
        except _FlopsFailed as failed:
            counts[-1], errors[-1] = failed.params, failed.error
        except Exception as exc:
            errors[-1] = one_line(exc)
    return CountReport(counts=counts, errors=errors, flops=flops, framework_version=info.version())


def run_peak(request: PeakRequest, started: Callable[[], None]) -> PeakReport:
    adapter = load_adapter(request.framework)
    started()
    settings = adapter.configure(request.device, request.threads) | {"env": _thread_env()}
    results: dict[str, dict[str, Any]] = {}
    for dtype in request.dtypes:
        try:
            workload = adapter.matmul(request.device, dtype, request.n)
            timing = measure(workload.step, workload.sync, request.timing, request.stop)
        except Exception as exc:
            results[dtype] = {"error": one_line(exc)}
            continue
        results[dtype] = {
            "flops_per_s": 2 * request.n**3 / timing.median_s,
            "median_s": timing.median_s,
            "ci_low_s": timing.ci_low_s,
            "ci_high_s": timing.ci_high_s,
        }
    return PeakReport(
        results=results, environment=adapter.environment(request.device), settings=settings
    )


def run_serve(request: ServeRequest) -> ServeReport:
    """One run of a serving point: the model behind LoadGen (fwbench.serve.loadgen)."""
    from fwbench.serve import loadgen

    case, spec = request.case, request.spec
    adapter = load_adapter(case.framework)
    settings = adapter.configure(case.device, case.threads) | {"env": _thread_env()}
    environment = adapter.environment(case.device)
    settings["serving_batch_sizes"] = loadgen.ladder(case.batch_size, spec.scenario)

    def report(**fields: Any) -> ServeReport:
        return ServeReport(environment=environment, settings=settings, **fields)

    reason = adapter.unavailable_reason(case.device)
    if reason:
        return report(status="unsupported", error=reason)
    try:
        lg = loadgen.LoadGen(Path(request.log_dir), request.seed)
    except ImportError:
        return report(
            status="error",
            error="MLPerf LoadGen is not installed: pip install 'fwbench[serve]' "
            "(the mlcommons-loadgen package)",
        )
    param_count = None
    try:
        start = time.perf_counter()
        served = loadgen.Served(adapter.build, case, spec.scenario)
        build_s = time.perf_counter() - start
        param_count = served.param_count
        settings |= served.settings()
        warmup_s = served.warm_up(request.timing)
        overhead = lg.overhead()
        # Other processes' CPU while LoadGen's tests ran: this worker's own tree (LoadGen's
        # threads, the batcher, any compile workers) is the work, the rest is other load.
        window = load.LoadWindow(lambda: load.tree_cpu_seconds(os.getpid()))
        run = loadgen.run_scenario(lg, served, spec)
        run["other_cpu_cores"] = window.other_cores()
    except Exception as exc:
        found = failure(adapter, exc, case.device, settings)
        return report(**found, param_count=param_count)
    run |= {"build_s": build_s, "warmup_s": warmup_s, "overhead_s": overhead}
    run["tests"] = [t.model_dump() for t in run.get("tests", [])]
    return report(status="ok", run=run, param_count=param_count)


def _protocol_channel() -> TextIO:
    """Keep the original stdout for protocol lines; send fd 1 (native prints) to the log."""
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return channel


def main() -> int:
    die_with_parent()
    channel = _protocol_channel()

    def send(message: dict[str, Any]) -> None:
        channel.write(json.dumps(message) + "\n")
        channel.flush()

    request: Request = TypeAdapter(Request).validate_json(sys.stdin.readline())
    if isinstance(request, CaseRequest):
        serve_case(request, send, sys.stdin)
        return 0

    def started() -> None:
        # The framework is imported: the launcher's time-out for the work starts now.
        send({"event": "started"})

    result: BaseModel
    if isinstance(request, CountRequest):
        result = run_count(request, started)
    elif isinstance(request, ServeRequest):
        result = run_serve(request)
    else:
        result = run_peak(request, started)
    send({"event": "report", "report": result.model_dump()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
