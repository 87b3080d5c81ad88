"""The GPU paths' logic, on the CPU: which NVML device a worker's CUDA_VISIBLE_DEVICES
names, energy's reasons, peaks per precision, and GPU kernels read with their ops.
(The paths themselves ran on an H100: docs/gpu.md.)"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fwbench.explain.categories import Categoriser
from fwbench.explain.kernels import kernel_launchers
from fwbench.launch.process import worker_env
from fwbench.launch.records import _work
from fwbench.measure import energy
from fwbench.measure.nvml import first_visible_handle, parse_visible_devices
from fwbench.store.db import ResultStore

UUIDS = ["GPU-6f1c2d3e-aaaa-bbbb-cccc-000000000000", "GPU-9a8b7c6d-aaaa-bbbb-cccc-111111111111"]


class FakeNvml:
    """NVML with two GPUs in PCI order; handles are the indices."""

    def nvmlDeviceGetCount(self) -> int:
        return len(UUIDS)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        if not 0 <= i < len(UUIDS):
            raise ValueError(f"NVML_ERROR_INVALID_ARGUMENT ({i})")
        return i

    def nvmlDeviceGetUUID(self, handle: int) -> bytes:
        return UUIDS[handle].encode()  # older nvidia-ml-py returns bytes


@pytest.mark.parametrize(
    ("visible", "entries"),
    [
        (None, None),
        ("", []),
        ("1", ["1"]),
        ("1,0", ["1", "0"]),
        (" 0 , 1", ["0", "1"]),
        ("0,x,1", ["0"]),  # CUDA stops at the first invalid entry
        ("-1", []),
        (UUIDS[1], [UUIDS[1]]),
        ("GPU-9a8b", ["GPU-9a8b"]),
    ],
)
def test_visible_devices_are_read_as_cuda_reads_them(
    visible: str | None, entries: list[str] | None
) -> None:
    assert parse_visible_devices(visible) == entries


@pytest.mark.parametrize(
    ("visible", "handle", "reason"),
    [
        (None, 0, None),
        ("1", 1, None),
        ("1,0", 1, None),
        (UUIDS[1], 1, None),  # Ray and Slurm set UUIDs: this left NVML with no device
        ("GPU-9a8b", 1, None),  # a unique prefix, as CUDA accepts
        ("", None, "leaves no GPU visible"),
        ("GPU-ffff", None, "no GPU has a UUID starting 'GPU-ffff'"),
        ("MIG-1234-5678", None, "MIG instance"),
    ],
)
def test_the_nvml_device_is_the_one_cuda_calls_cuda_0(
    visible: str | None, handle: int | None, reason: str | None
) -> None:
    found, why = first_visible_handle(FakeNvml(), visible)
    assert found == handle
    assert (why is None) == (reason is None)
    if reason:
        assert reason in str(why)


def test_gpu_workers_number_devices_in_nvml_order_and_cpu_workers_see_none() -> None:
    assert worker_env(2, "cuda")["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert worker_env(2, "cpu")["CUDA_VISIBLE_DEVICES"] == ""


@dataclass
class Counter(energy.EnergyCounter):
    readings: list[float] = field(default_factory=list)
    source = "test counter"

    def read_joules(self) -> float:
        return self.readings.pop(0)


def test_a_counter_that_does_not_advance_is_not_called_a_short_window() -> None:
    acc = energy.EnergyAccumulator([Counter([5.0, 5.0])])
    acc.stop(acc.start(), window_s=2.0, steps=100)
    found = energy.summarise(acc, [], batch_size=8)
    assert found.status == "unavailable"
    assert "did not advance over 2.00 s" in str(found.reason)
    short = energy.EnergyAccumulator([Counter([5.0, 6.0])])
    short.stop(short.start(), window_s=0.5, steps=10)
    assert "too short" in str(energy.summarise(short, [], batch_size=8).reason)


def test_a_measured_window_gives_joules_per_sample_and_power() -> None:
    acc = energy.EnergyAccumulator([Counter([100.0, 160.0])])
    acc.stop(acc.start(), window_s=1.5, steps=30)
    found = energy.summarise(acc, [], batch_size=4)
    assert found.status == "measured"
    assert found.joules_per_sample == pytest.approx(60 / 30 / 4)
    assert found.average_power_w == pytest.approx(40.0)


def test_the_energy_of_a_run_that_failed_is_not_the_cases(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run that failed after its blocks (its final report) is not the case's timing,
    and its joules are not the case's either: they had been summed in."""
    from fwbench.case import Case
    from fwbench.measure import trackers

    counter = Counter([0.0, 100.0, 100.0, 160.0])  # the failed run 100 J, the kept 60 J
    monkeypatch.setattr(energy, "counters_for", lambda device: ([counter], []))
    tracker = trackers.Energy(Case.build(framework="torch", model="resnet18", batch_size=4))
    for kept in (False, True):
        token = tracker.before_block()
        tracker.after_block(token, 1.5, 30)
        tracker.end_run(kept)
    found = tracker.result()
    assert found["joules_per_step"] == pytest.approx(60 / 30)
    assert found["window_s"] == pytest.approx(1.5)


def _peak(store: ResultStore, device: str, dtype: str, threads: int, flops: float) -> None:
    store.add_peak(
        {
            "peak_id": f"{device}-{dtype}-{threads}-{flops}",
            "measured_at": datetime.now(),
            "host_key": "h",
            "framework": "torch",
            "device": device,
            "dtype": dtype,
            "threads": threads,
            "n": 8192,
            "flops_per_s": flops,
            "median_s": 1.0,
            "ci_low_s": 1.0,
            "ci_high_s": 1.0,
            "environment": "{}",
        }
    )


def test_peaks_are_per_precision_and_a_gpus_ignores_host_threads(tmp_path: Path) -> None:
    with ResultStore(tmp_path / "r.duckdb") as store:
        _peak(store, "cuda", "fp32", 16, 51e12)
        _peak(store, "cuda", "bf16", 16, 790e12)
        _peak(store, "cpu", "fp32", 2, 1e11)
        assert store.best_peak("h", "cuda", "bf16", threads=4) == 790e12
        assert store.best_peak("h", "cuda", "fp32", threads=4) == 51e12
        assert store.best_peak("h", "cpu", "fp32", threads=1) is None
        assert store.best_peak("h", "cpu", "fp32", threads=2) == 1e11


def test_work_shares_the_peak_of_its_own_precision() -> None:
    work = _work({"flops_per_step": 1e12, "counter": "c"}, 0.01, (200e12, "bf16"))
    assert work is not None
    assert work.peak_dtype == "bf16"
    assert work.share_of_peak == pytest.approx(0.5)
    none = _work({"flops_per_step": 1e12, "counter": "c"}, 0.01, (None, "bf16"))
    assert none is not None and none.peak_dtype is None and none.share_of_peak is None


def _event(kind: str, name: str, **fields: Any) -> SimpleNamespace:
    return SimpleNamespace(device_type=SimpleNamespace(name=kind), name=name, **fields)


def _kernel(name: str, us: float, link: int | None) -> SimpleNamespace:
    extra = {} if link is None else {"linked_correlation_id": link}
    time_range = SimpleNamespace(elapsed_us=lambda: us)
    return _event("CUDA", name, time_range=time_range, **extra)


def test_gpu_kernels_are_read_with_the_op_that_launched_them() -> None:
    gemm = "sm80_xmma_fprop_implicit_gemm_f32f32_nchwkcrs_execute_kernel__5x_cudnn"
    conv = _event("CPU", "aten::cudnn_convolution", id=7, kernels=[], cpu_parent=None)
    linear = _event("CPU", "aten::addmm", id=9, kernels=[], cpu_parent=None)
    by_link = _kernel(gemm, 120.0, link=7)
    # PyTorch versions that keep no link on the kernel: its op lists it by name and time.
    bn = _event(
        "CPU",
        "aten::cudnn_batch_norm",
        id=11,
        kernels=[SimpleNamespace(name="bn_fw_tr_1C11_kernel", duration=33.0)],
        cpu_parent=None,
    )
    by_name = _kernel("bn_fw_tr_1C11_kernel", 33.0, link=None)
    orphan = _kernel("some_kernel", 5.0, link=None)
    found = kernel_launchers([conv, linear, bn, by_link, by_name, orphan])
    assert found[id(by_link)] is conv
    assert found[id(by_name)] is bn
    assert id(orphan) not in found
    categorise = Categoriser()
    # By its name alone, cuDNN's convolution kernel reads as a GEMM.
    assert categorise(gemm) == "matmul / GEMM"
    assert categorise(f"{conv.name}|{gemm}") == "convolution"
    assert categorise(f"{bn.name}|bn_fw_tr_1C11_kernel") == "normalisation"


def _range(kind: str, name: str, start: float, end: float, **fields: Any) -> SimpleNamespace:
    """A torch.profiler event of `name` from `start` to `end` (us)."""
    when = SimpleNamespace(start=start, end=end, elapsed_us=lambda: end - start)
    return _event(kind, name, time_range=when, **fields)


def test_a_gpu_profiles_ranges_are_read_from_the_cpu_not_their_gpu_annotations() -> None:
    """On a GPU, torch.profiler shows every range twice: on the CPU, and as a GPU "user
    annotation" from its first kernel to its last. The window is the CPU's (to the sync
    after the last kernel), and Optimizer.step's annotation is no kernel: the gap between
    the kernels it spans is idle, not optimizer time."""
    from fwbench.explain.categories import IDLE, Categoriser
    from fwbench.explain.kernels import read_events
    from fwbench.explain.timeline import WINDOW, attribute

    window = _range("CPU", WINDOW, 0, 1000, id=1, kernels=[], cpu_parent=None, thread=1)
    step = _range("CPU", "Optimizer.step#SGD.step", 100, 200, id=2, kernels=[],
                  cpu_parent=window, thread=1)  # fmt: skip
    add = _range("CPU", "aten::_foreach_add_", 110, 190, id=3, kernels=[], cpu_parent=step,
                 thread=1)  # fmt: skip
    gpu = {"device_index": 0, "is_user_annotation": True}
    kernels = [
        _range("CUDA", "multi_tensor_apply_kernel", 300, 310, linked_correlation_id=3,
               device_index=0, is_user_annotation=False),
        _range("CUDA", "multi_tensor_apply_kernel", 500, 510, linked_correlation_id=3,
               device_index=0, is_user_annotation=False),
    ]  # fmt: skip
    copies = [
        _range("CUDA", WINDOW, 300, 510, **gpu),
        _range("CUDA", "Optimizer.step#SGD.step", 300, 510, **gpu),
    ]
    events, span = read_events([window, step, add, *kernels, *copies], on_gpu=True)
    assert (span.start, span.end) == (0.0, 1000e-6)
    assert [e.name for e in events] == ["multi_tensor_apply_kernel"] * 2
    found = attribute(events, span.span, Categoriser()).by_category
    assert found["optimizer update"] == pytest.approx(20e-6)
    assert found[IDLE] == pytest.approx(980e-6)


PINNED = """
import json
import torch
from fwbench.case import Case
from fwbench.frameworks.keras_torch import KerasTorchAdapter

torch.backends.cudnn.allow_tf32 = True  # PyTorch's own default
case = Case.build(framework="keras-torch", model="resnet18", task="infer", device="cuda",
                  batch_size=2, input_size=32, num_classes=10, threads=1)
adapter = KerasTorchAdapter()
adapter.configure("cpu", 1)
settings = adapter.build(case).settings()
print(json.dumps({"tf32_cudnn": torch.backends.cudnn.allow_tf32, "recorded": settings}))
"""


def test_keras_on_pytorch_pins_fp32_on_a_gpu_as_pytorch_does(tmp_path: Path) -> None:
    """PyTorch runs cuDNN's fp32 convolutions in TF32 unless told not to, and Keras tells
    it nothing: a Keras-on-PyTorch case on a GPU is pinned to fp32 and records it, as
    PyTorch's own cases are (the flags are set and read the same without a GPU)."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", PINNED], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["tf32_cudnn"] is False
    assert found["recorded"]["tf32_cudnn"] is False and found["recorded"]["tf32_matmul"] is False


def test_a_worker_records_the_environment_its_numbers_depend_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Thread placement, oneDNN's and XLA's switches change timings: they are recorded,
    with the CPUs the worker may run on; another tool's TF_ variables and anything named
    like a secret are not (a results file is shared)."""
    import os

    from fwbench.launch.worker import _thread_env

    monkeypatch.setenv("OMP_PROC_BIND", "close")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    monkeypatch.setenv("TF_VAR_db_password", "hunter2")
    monkeypatch.setenv("CUDA_API_KEY", "x")
    found = _thread_env()
    assert found["OMP_PROC_BIND"] == "close" and found["ONEDNN_MAX_CPU_ISA"] == "AVX2"
    assert found["XLA_FLAGS"] == "--xla_cpu_enable_fast_math=false"
    assert found["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert "TF_VAR_db_password" not in found and "CUDA_API_KEY" not in found
    cpus = sorted(os.sched_getaffinity(0))
    assert found["cpu_affinity"] == (f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0]))
