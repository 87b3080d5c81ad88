"""The worker process: imports one framework, runs one request, writes one JSON file.

Run as `python -m fwbench.launch.worker OUT.json` with the request on stdin. Anything
that can go wrong inside the framework (out of memory, an exception) is turned into a
report here; what kills the process (a segfault, a time-out) the launcher records.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from fwbench.frameworks.registry import get_framework
from fwbench.launch.protocol import CaseReport, CaseRequest, CountReport, CountRequest
from fwbench.measure.timing import measure

Request = CaseRequest | CountRequest


def one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    text = lines[0] if lines else ""
    return f"{type(exc).__name__}: {text}"[:500]


def run_case(request: CaseRequest) -> CaseReport:
    case = request.case
    adapter = get_framework(case.framework).load_adapter()
    settings = adapter.configure(case.device, case.threads)
    settings["env"] = {
        k: os.environ[k]
        for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES")
        if k in os.environ
    }
    environment = adapter.environment(case.device)
    reason = adapter.unavailable_reason(case.device)
    if reason:
        return CaseReport(
            status="unsupported", error=reason, environment=environment, settings=settings
        )
    param_count = None
    try:
        start = time.perf_counter()
        workload = adapter.build(case)
        build_s = time.perf_counter() - start
        param_count = workload.param_count
        timing = measure(workload.step, workload.sync, request.timing)
        settings |= workload.counters()
    except Exception as exc:
        traceback.print_exc()
        status = "oom" if adapter.is_oom(exc) else "error"
        return CaseReport(
            status=status,
            error=one_line(exc),
            param_count=param_count,
            environment=environment,
            settings=settings,
        )
    return CaseReport(
        status="ok",
        build_s=build_s,
        timing=dataclasses.asdict(timing),
        param_count=param_count,
        environment=environment,
        settings=settings,
    )


def run_count(request: CountRequest) -> CountReport:
    info = get_framework(request.framework)
    adapter = info.load_adapter()
    counts: list[int | None] = []
    errors: list[str | None] = []
    for item in request.items:
        try:
            model = adapter.build_model(item.model, item.num_classes, item.input_size)
            counts.append(adapter.count_params(model))
            errors.append(None)
        except Exception as exc:
            counts.append(None)
            errors.append(one_line(exc))
        finally:
            model = None
    return CountReport(counts=counts, errors=errors, framework_version=info.version())


def _die_with_parent() -> None:
    """Linux: if the launcher is killed (even with SIGKILL), take this worker down too."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(1)


def main(argv: list[str]) -> int:
    _die_with_parent()
    out = Path(argv[1])
    request: Request = TypeAdapter(Request).validate_json(sys.stdin.read())
    report: Any = run_case(request) if isinstance(request, CaseRequest) else run_count(request)
    # Atomic: the launcher sees a whole report or none.
    tmp = out.with_suffix(".tmp")
    tmp.write_text(report.model_dump_json())
    tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
