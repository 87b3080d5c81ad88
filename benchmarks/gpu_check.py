"""GPU check: run every CUDA path of fwbench on this machine's GPU; pass/fail with figures.

    scripts/gpu-check --out DIR                  # installs fwbench, then runs this
    python benchmarks/gpu_check.py --out DIR [--budget-s 540] [--only peak,sync] [--skip figures]

Each check prints one line per claim (`PASS`, `FAIL`, `INFO`, `SKIP`, `ERROR`) with its
figure, and the whole record is rewritten after every check to DIR/gpu-check.json (so a
command stopped at its time limit still leaves what it found). Results go to
DIR/gpu-check.duckdb and DIR/figures.duckdb, exported beside them; the figures report
(relative training and inference time) to DIR/figures.md.

Checks run in the order listed by --list; one whose estimate no longer fits in the budget
is skipped with that reason. The TensorFlow GPU paths are not checked where TensorFlow is
not installed: they are reported as SKIP with that reason.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

# Dense (not sparse) tensor-core and CUDA-core peaks from NVIDIA's H100 / H200 datasheets,
# in FLOP/s. The SXM figures hold for the H200 too (same GH100 compute at the same clock).
DATASHEET: dict[str, dict[str, float]] = {
    "H100 SXM": {"fp32": 66.9e12, "tf32": 494.7e12, "bf16": 989.4e12, "fp16": 989.4e12},
    "H100 PCIe": {"fp32": 51.2e12, "tf32": 378.0e12, "bf16": 756.0e12, "fp16": 756.0e12},
    "H100 NVL": {"fp32": 60.0e12, "tf32": 417.5e12, "bf16": 835.5e12, "fp16": 835.5e12},
    "H200": {"fp32": 66.9e12, "tf32": 494.7e12, "bf16": 989.4e12, "fp16": 989.4e12},
}


def datasheet_for(gpu_name: str) -> tuple[str, dict[str, float]] | None:
    """The datasheet entry for an nvidia-smi GPU name, or None for a GPU not in the table."""
    name = gpu_name.upper()
    if "H200" in name:
        return "H200", DATASHEET["H200"]
    if "H100" in name:
        for variant in ("PCIe", "NVL"):
            if variant.upper() in name:
                return f"H100 {variant}", DATASHEET[f"H100 {variant}"]
        return "H100 SXM", DATASHEET["H100 SXM"]
    return None


@dataclass
class Line:
    check: str
    status: str  # PASS | FAIL | INFO | SKIP | ERROR
    claim: str
    figure: str = ""
    data: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        figure = f": {self.figure}" if self.figure else ""
        return f"{self.status:<5} {self.check}: {self.claim}{figure}"


class Context:
    def __init__(self, out: Path, budget_s: float, python: str, smoke: bool = False) -> None:
        self.out = out
        self.python = python
        # --smoke: the checks' own logic on this machine's CPU at toy sizes, before a GPU
        # session spends its minutes on them.
        self.smoke = smoke
        self.device = "cpu" if smoke else "cuda"
        self.deadline = time.monotonic() + budget_s
        self.db = out / "gpu-check.duckdb"
        self.figures_db = out / "figures.duckdb"
        self.lines: list[Line] = []
        self.record: dict[str, Any] = {
            "started_at": datetime.now().isoformat(timespec="seconds"),
            "budget_s": budget_s,
            "checks": [],
        }
        self.log = (out / "gpu-check.log").open("a")
        # What the flax and llm checks sweep (--flax-models, --llm-model, --llm-torch-modes):
        # a later GPU session measures what an earlier one's budget left out.
        self.flax_models: list[str] = list(FLAX_MODELS)
        self.llm_model = LLM_MODEL
        self.llm_torch_modes: list[str] = ["eager"]

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def say(self, line: Line) -> None:
        self.lines.append(line)
        print(line.text(), flush=True)
        self.log.write(line.text() + "\n")
        self.log.flush()
        self.save()

    def save(self) -> None:
        self.record["checks"] = [asdict(line) for line in self.lines]
        path = self.out / "gpu-check.json"
        path.write_text(json.dumps(self.record, indent=1, default=str) + "\n")

    def fwbench(self, *args: str, timeout: float | None = None) -> tuple[int, Any, str]:
        """Run `fwbench ARGS`; (exit code, parsed stdout JSON or None, stderr tail)."""
        limit = max(5.0, min(timeout or 1e9, self.remaining()))
        cmd = [self.python, "-m", "fwbench.cli.app", *args]
        self.log.write(f"$ fwbench {' '.join(args)}\n")
        self.log.flush()
        # A session of its own: a time-out takes the command's whole process group down
        # (a sweep's workers and what they started), or it would run on beside the next
        # check and slow what that one times.
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            out, err = proc.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            # What it had printed: where the time went.
            self.log.write(f"[stopped after {limit:.0f} s]\n{out[-3000:]}\n{err[-4000:]}\n")
            self.log.flush()
            return 124, None, f"stopped after {limit:.0f} s: {(err.strip() or out.strip())[-400:]}"
        done = subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        self.log.write(done.stderr[-4000:] + "\n")
        try:
            parsed = json.loads(done.stdout) if done.stdout.strip() else None
        except json.JSONDecodeError:
            parsed = None
            self.log.write(done.stdout[-3000:] + "\n")
        return done.returncode, parsed, done.stderr.strip()[-600:]


def _records(found: Any) -> list[dict[str, Any]]:
    if found is None:
        return []
    return found if isinstance(found, list) else [found]


def _ms(record: dict[str, Any]) -> str:
    st = record.get("step_time_s")
    if not st:
        return f"{record.get('status')}: {record.get('error')}"
    return f"{st['median'] * 1e3:.2f} ms ({st['ci_low'] * 1e3:.2f}-{st['ci_high'] * 1e3:.2f})"


RUN_FLAGS = ("--device", "cuda", "--max-time", "3", "--timeout", "300")


def run_case(ctx: Context, *flags: str, db: Path | None = None) -> list[dict[str, Any]]:
    rc, found, err = ctx.fwbench(
        "run", *flags, *RUN_FLAGS, "--db", str(db or ctx.db), "--json", timeout=360
    )
    records = _records(found)
    if not records:
        raise RuntimeError(f"fwbench run exited {rc} without a result: {err}")
    return records


# --- checks -------------------------------------------------------------------------------


def check_env(ctx: Context) -> None:
    _, env, err = ctx.fwbench("env", "--json")
    gpus = (env or {}).get("gpus") or []
    ctx.record["environment"] = env
    ctx.say(
        Line(
            "env",
            "PASS" if gpus else "FAIL",
            "fwbench env detects the GPU through nvidia-smi",
            ", ".join(f"{g['name']} ({g['memory']}, driver {g['driver']})" for g in gpus) or err,
        )
    )
    fws = (env or {}).get("frameworks", {})
    ctx.say(Line("env", "INFO", "framework versions", json.dumps(fws)))
    if not fws.get("tensorflow"):
        ctx.say(
            Line(
                "env",
                "SKIP",
                "TensorFlow GPU paths (sync_devices, memory growth, TF32 pinning, "
                "MirroredStrategy)",
                "TensorFlow is not installed on this machine: they stay unverified",
            )
        )


def _gpu_name(ctx: Context) -> str:
    gpus = (ctx.record.get("environment") or {}).get("gpus") or []
    return str(gpus[0]["name"]) if gpus else ""


def check_peak(ctx: Context) -> None:
    args = ["peak", "--device", "cuda", "--size", "8192", "--db", str(ctx.db), "--json"]
    for dtype in ("fp32", "tf32", "bf16", "fp16"):
        args += ["--dtype", dtype]
    rc, rows, err = ctx.fwbench(*args, timeout=240)
    if not rows:
        raise RuntimeError(f"fwbench peak exited {rc}: {err}")
    sheet = datasheet_for(_gpu_name(ctx))
    for row in rows:
        fw, dtype = row["framework"], row["dtype"]
        if "flops_per_s" not in row:
            ctx.say(Line("peak", "FAIL", f"{fw} {dtype} matmul runs", row.get("error", "")))
            continue
        tflops = row["flops_per_s"] / 1e12
        if sheet is None:
            ctx.say(Line("peak", "INFO", f"{fw} {dtype}", f"{tflops:.1f} TFLOP/s", row))
            continue
        spec = sheet[1][dtype] / 1e12
        share = tflops / spec
        # Above the datasheet means the dtype is not what it says (TF32 inside "fp32").
        ok = 0.3 <= share <= 1.05
        ctx.say(
            Line(
                "peak",
                "PASS" if ok else "FAIL",
                f"{fw} {dtype} 8192^3 matmul within 30-105% of the {sheet[0]} datasheet",
                f"{tflops:.1f} TFLOP/s = {share:.0%} of {spec:.1f}",
                {**row, "datasheet_flops_per_s": spec * 1e12, "share_of_datasheet": share},
            )
        )


_SYNC_PROBE = r"""
import json, statistics, sys, time
import torch
from fwbench.case import Case
from fwbench.frameworks.torch import TorchAdapter
from fwbench.measure.timing import run_block, sync_overhead

adapter = TorchAdapter()
adapter.configure("cuda", 4)
case = Case.build(framework="torch", model="resnet50", task="train", batch_size=32,
                  input_size=224, device="cuda")
w = adapter.build(case)
for _ in range(15):
    w.step()
w.sync()
clock = time.perf_counter
launch, synced = [], []
for _ in range(20):
    w.sync()
    t = clock(); w.step(); launch.append(clock() - t)
    w.sync()
    t = clock(); w.step(); w.sync(); synced.append(clock() - t)
k, by_sync, by_events = 5, [], []
for _ in range(30):
    by_sync.append(run_block(w.step, w.sync, k, clock) / k)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    w.sync()
    start.record()
    for _ in range(k):
        w.step()
    end.record()
    end.synchronize()
    by_events.append(start.elapsed_time(end) / 1e3 / k)
a = torch.randn(8192, 8192, device="cuda")
torch.mm(a, a); torch.cuda.synchronize()
mm_launch, mm_synced = [], []
for _ in range(10):
    t = clock(); torch.mm(a, a); mm_launch.append(clock() - t)
    torch.cuda.synchronize()
    t = clock(); torch.mm(a, a); torch.cuda.synchronize(); mm_synced.append(clock() - t)
med = statistics.median
print(json.dumps({
    "resnet50_step_launch_s": med(launch), "resnet50_step_synced_s": med(synced),
    "block_sync_s": med(by_sync), "block_events_s": med(by_events),
    "sync_overhead_s": sync_overhead(w.sync, clock),
    "matmul_launch_s": med(mm_launch), "matmul_synced_s": med(mm_synced),
    "steps_per_block": k, "blocks": 30,
}))
"""


def check_sync(ctx: Context) -> None:
    done = subprocess.run(
        [ctx.python, "-c", _SYNC_PROBE],
        capture_output=True,
        text=True,
        timeout=max(10.0, min(240.0, ctx.remaining())),
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip()[-600:])
    f = json.loads(done.stdout.strip().splitlines()[-1])
    ratio = f["block_events_s"] / f["block_sync_s"]
    ctx.say(
        Line(
            "sync",
            "PASS" if abs(ratio - 1) <= 0.01 else "FAIL",
            "CUDA-event timing agrees with synchronize-closed blocks within 1% "
            "(ResNet-50 train, batch 32, 224 px, 30 blocks of 5 steps)",
            f"events {f['block_events_s'] * 1e3:.2f} ms vs synchronize "
            f"{f['block_sync_s'] * 1e3:.2f} ms per step: ratio {ratio:.4f}",
            f,
        )
    )
    mm = f["matmul_launch_s"] / f["matmul_synced_s"]
    ctx.say(
        Line(
            "sync",
            "PASS" if mm < 0.1 else "FAIL",
            "an unsynchronised fp32 8192^3 matmul times its launch, not its work",
            f"unsynced {f['matmul_launch_s'] * 1e6:.0f} us vs synced "
            f"{f['matmul_synced_s'] * 1e3:.2f} ms ({mm:.1%})",
        )
    )
    step = f["resnet50_step_launch_s"] / f["resnet50_step_synced_s"]
    ctx.say(
        Line(
            "sync",
            "PASS" if step < 1 else "FAIL",
            "an unsynchronised ResNet-50 train step returns before the GPU is done",
            f"launch {f['resnet50_step_launch_s'] * 1e3:.2f} ms vs synced "
            f"{f['resnet50_step_synced_s'] * 1e3:.2f} ms; sync overhead "
            f"{f['sync_overhead_s'] * 1e6:.1f} us",
        )
    )


def check_memory(ctx: Context) -> None:
    (r,) = run_case(
        ctx,
        *("--framework", "torch", "--model", "resnet50", "--task", "train"),
        *("--batch-size", "32", "--input-size", "224"),
    )
    ctx.record["resnet50_train"] = _compact(r)
    device = ((r.get("memory") or {}).get("device")) or {}
    alloc = device.get("allocated_peak_bytes")
    reserved = device.get("reserved_peak_bytes")
    nvml = device.get("nvml_used_peak_bytes")
    ok = r["status"] == "ok" and None not in (alloc, reserved, nvml) and alloc <= reserved <= nvml
    gib = 2**30
    ctx.say(
        Line(
            "memory",
            "PASS" if ok else "FAIL",
            "allocator peak <= reserved <= NVML used, all stored (ResNet-50 train b32)",
            f"allocated {alloc / gib:.2f} GiB, reserved {reserved / gib:.2f} GiB, "
            f"NVML {nvml / gib:.2f} GiB"
            if ok
            else json.dumps(device) + f" {r.get('error') or ''}",
            device,
        )
    )
    work = r.get("work") or {}
    share = work.get("share_of_peak")
    ctx.say(
        Line(
            "peak",
            "PASS" if share else "FAIL",
            "ResNet-50 train fp32 carries its share of the measured fp32 peak",
            f"{_ms(r)}; {(work.get('achieved_flops_per_s') or 0) / 1e12:.1f} TFLOP/s = "
            f"{share:.0%} of {(work.get('peak_flops_per_s') or 0) / 1e12:.1f}"
            if share
            else json.dumps(work),
            work,
        )
    )


def check_energy(ctx: Context) -> None:
    sweep = {
        "name": "energy",
        "framework": "torch",
        "model": "resnet50",
        "task": ["infer", "train"],
        "batch_size": [1, 8, 32, 64],
        "input_size": 224,
        "device": "cuda",
        "timing": {"max_time_s": 2.0},
    }
    records = _sweep(ctx, sweep, ctx.db, timeout=300)
    for r in records:
        e = r.get("energy") or {}
        label = f"ResNet-50 {r['task']} b{r['batch_size']}"
        if e.get("status") != "measured":
            ctx.say(Line("energy", "FAIL", f"{label}: NVML energy measured", str(e), e))
            continue
        ok = e["window_s"] >= 1.0 and e["joules_per_sample"] > 0
        ctx.say(
            Line(
                "energy",
                "PASS" if ok else "FAIL",
                f"{label}: NVML total-energy counter over >= 1 s",
                f"{e['joules_per_sample']:.3f} J/sample, {e['average_power_w']:.0f} W over "
                f"{e['window_s']:.1f} s; {_ms(r)}",
                {"energy": e, "step_time_s": r.get("step_time_s")},
            )
        )


def _sweep(ctx: Context, sweep: dict[str, Any], db: Path, timeout: float) -> list[dict[str, Any]]:
    path = ctx.out / f"{sweep['name']}.yaml"
    path.write_text(json.dumps(sweep))  # JSON is YAML
    rc, _, err = ctx.fwbench("sweep", str(path), "--db", str(db), "--resume", timeout=timeout)
    _, found, err2 = ctx.fwbench("results", "--db", str(db), "--json")
    names = {sweep["model"]} if isinstance(sweep["model"], str) else set(sweep["model"])
    records = [r for r in _records(found) if r["model"] in names and r["device"] == ctx.device]
    if not records:
        raise RuntimeError(f"sweep exited {rc} with no results: {err or err2}")
    return records


MODES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("eager fp32", ("--mode", "eager")),
    ("script (TorchScript)", ("--mode", "script")),
    ("compile (inductor)", ("--mode", "compile")),
    ("compile-reduce-overhead (CUDA graphs)", ("--mode", "compile-reduce-overhead")),
    ("channels_last", ("--layout", "channels_last")),
    ("bf16 autocast", ("--precision", "bf16")),
    ("fp16 autocast + GradScaler", ("--precision", "fp16")),
    ("tf32", ("--precision", "tf32")),
    ("cudnn autotune", ("--autotune",)),
)


def check_modes(ctx: Context) -> None:
    base = ("--framework", "torch", "--model", "resnet18", "--task", "train")
    base += ("--batch-size", "32", "--input-size", "224")
    for name, flags in MODES:
        if ctx.remaining() < 60:
            ctx.say(Line("modes", "SKIP", name, "out of time"))
            continue
        (r,) = run_case(ctx, *base, *flags)
        s = r.get("settings") or {}
        before, after = s.get("compiles_after_warmup"), s.get("compiles_after_timing")
        recompiled = before is not None and after != before
        labels = {
            k: s.get(k)
            for k in (
                "precision",
                "layout",
                "tf32_matmul",
                "tf32_cudnn",
                "cudnn_benchmark",
                "grad_scaler",
                "autocast_dtype",
            )
        }
        ok = r["status"] == "ok" and not recompiled
        ctx.say(
            Line(
                "modes",
                "PASS" if ok else "FAIL",
                f"ResNet-18 train b32 224 px, {name}: runs, labelled, no recompilation "
                "in the steady state",
                f"{_ms(r)}; first step {r.get('first_step_s') or 0:.2f} s; "
                f"compiles {before}->{after}; {json.dumps(labels)}"
                + (f"; warnings: {r['warnings']}" if r.get("warnings") else ""),
                {"result": _compact(r)},
            )
        )


def check_ddp(ctx: Context) -> None:
    (r,) = run_case(
        ctx,
        *("--framework", "torch", "--model", "resnet18", "--task", "train"),
        *("--batch-size", "32", "--input-size", "224", "--strategy", "ddp", "--world-size", "1"),
    )
    d = r.get("distributed") or {}
    ok = r["status"] == "ok" and d.get("backend") == "nccl"
    ctx.say(
        Line(
            "ddp",
            "PASS" if ok else "FAIL",
            "DDP on nccl, world size 1, launched by torchrun",
            f"{_ms(r)}; backend {d.get('backend')}; launcher {d.get('launcher')}",
            {"result": _compact(r)},
        )
    )


def check_keras(ctx: Context) -> None:
    for fw, flags in (
        ("keras-jax", ("--mode", "jit", "--precision", "bf16")),
        ("keras-jax", ("--mode", "jit")),
        ("keras-torch", ("--mode", "eager")),
    ):
        (r,) = run_case(
            ctx,
            *("--framework", fw, "--model", "resnet50", "--task", "train"),
            *("--batch-size", "32", "--input-size", "224", *flags),
        )
        s = r.get("settings") or {}
        ok = r["status"] == "ok"
        shown = ("jax_platform", "keras_backend", "precision", "jax_default_matmul_precision")
        ctx.say(
            Line(
                "keras",
                "PASS" if ok else "FAIL",
                f"{fw} {' '.join(flags)} ResNet-50 train b32 on the GPU",
                f"{_ms(r)}; first step {r.get('first_step_s') or 0:.1f} s; "
                f"{json.dumps({k: s.get(k) for k in shown})}",
                {"result": _compact(r)},
            )
        )


def check_explain(ctx: Context) -> None:
    rc, found, err = ctx.fwbench(
        "explain",
        *("--framework", "torch", "--mode", "eager", "--model", "resnet18", "--task", "train"),
        *("--batch-size", "32", "--input-size", "224", "--device", "cuda", "--max-time", "2"),
        *("--db", str(ctx.db), "--json"),
        timeout=300,
    )
    records = _records(found)
    b = (records[0].get("breakdown") if records else None) or {}
    cats: dict[str, float] = b.get("categories") or {}
    step = sum(cats.values()) or 1.0
    # ResNet-18 training is mostly convolution; cuDNN's kernels are named GEMMs, so this
    # holds only if kernels are read with the op that launched them.
    ok = cats.get("convolution", 0) / step > 0.3 and cats.get("other ops", 0) / step < 0.1
    ctx.say(
        Line(
            "explain",
            "PASS" if ok else "FAIL",
            "fwbench explain on the GPU puts ResNet-18's kernels in their ops' categories "
            "(convolution > 30%, other < 10% of the step)",
            ", ".join(f"{k} {v * 1e3:.2f} ms" for k, v in sorted(cats.items(), key=lambda x: -x[1]))
            or f"exit {rc}: {err}",
            {"categories": cats, "overhead": b.get("overhead")},
        )
    )


def check_runtimes(ctx: Context) -> None:
    """ONNX Runtime's CUDA provider beside PyTorch (a SKIP for a CPU-only onnxruntime)."""
    try:
        import onnxruntime
    except ImportError:
        ctx.say(Line("runtimes", "SKIP", "ONNX Runtime on the GPU", "onnxruntime not installed"))
        return
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        providers = ", ".join(onnxruntime.get_available_providers())
        ctx.say(
            Line(
                "runtimes",
                "SKIP",
                "ONNX Runtime on the GPU",
                f"onnxruntime {onnxruntime.__version__} has {providers}: needs onnxruntime-gpu",
            )
        )
        return
    records = run_case(
        ctx,
        *("--framework", "torch", "--framework", "onnxruntime", "--model", "resnet50"),
        *("--task", "infer", "--batch-size", "32", "--input-size", "224"),
    )
    by_fw = {r["framework"]: r for r in records}
    r = by_fw.get("onnxruntime", {})
    s = r.get("settings") or {}
    ok = (
        r.get("status") == "ok"
        and (s.get("providers") or [""])[0] == "CUDAExecutionProvider"
        and s.get("output_check") == "agrees"
        and s.get("io_binding") == "cuda"
        and s.get("ort_cuda_use_tf32") == "0"
    )
    shown = ("providers", "io_binding", "ort_cuda_use_tf32", "ort_cuda_cudnn_conv_algo_search")
    ctx.say(
        Line(
            "runtimes",
            "PASS" if ok else "FAIL",
            "ONNX Runtime's CUDA provider runs ResNet-50 infer b32 224 px with I/O binding, "
            "fp32 without TF32, outputs agreeing with PyTorch's",
            f"onnxruntime {_ms(r)} vs torch {_ms(by_fw.get('torch', {}))}; "
            f"{json.dumps({k: s.get(k) for k in shown})}",
            {"results": [_compact(x) for x in records]},
        )
    )


FIGURE_MODELS = ("resnet18", "mobilenet_v2", "vgg16", "resnet152", "efficientnet_b4")


def check_figures(ctx: Context) -> None:
    """The ASU study's Figures 1-2 (relative training / inference time), torch vs JAX."""
    sweep = {
        "name": "figures",
        "framework": ["torch", "keras-jax"],
        "mode": {"torch": "eager", "keras-jax": "jit"},
        "model": list(FIGURE_MODELS),
        "task": ["train", "infer"],
        "batch_size": [8, 32],
        "input_size": 224,
        "device": "cuda",
        "timing": {"max_time_s": 1.0, "target_ci": 0.02},
        "timeout_s": 180,
    }
    budget = ctx.remaining() - 30
    if budget < 60:
        ctx.say(Line("figures", "SKIP", "Figures 1-2 on this GPU", "out of time"))
        return
    try:
        records = _sweep(ctx, sweep, ctx.figures_db, timeout=budget)
    except RuntimeError as exc:
        ctx.say(Line("figures", "FAIL", "Figures 1-2 on this GPU", str(exc)))
        return
    rc, _, err = ctx.fwbench(
        "report", str(ctx.figures_db), "-o", str(ctx.out / "figures.md"), timeout=120
    )
    ok = [r for r in records if r["status"] == "ok"]
    ctx.record["figures"] = [_compact(r) for r in records]
    ctx.say(
        Line(
            "figures",
            "PASS" if ok and rc == 0 else "FAIL",
            "relative training and inference time, torch eager vs keras-jax jit, 224 px",
            f"{len(ok)} of {len(records)} cases ok; report exit {rc} {err if rc else ''}".strip(),
        )
    )


def _verdicts(ctx: Context, check: str, db: Path, claim: str) -> None:
    """One line per compared workload: each variant's median and the verdict."""
    from fwbench.report.summary import summarise
    from fwbench.store.db import ResultStore

    with ResultStore(db, read_only=True) as store:
        results = store.results()
    _, rows = summarise(results)
    for row in rows:
        firsts = list(row.results.values())
        c = firsts[0].case
        shown = []
        for variant, r in row.results.items():
            m = r.measurement
            if m is None:
                shown.append(f"{variant} {r.status}: {(r.error or '')[:160]}")
                continue
            figure = m.figures.get("tpot_s") if c.task == "generate" else m.step_time_s
            assert figure is not None
            shown.append(
                f"{variant} {figure.median * 1e3:.2f} ms "
                f"({figure.ci_low * 1e3:.2f}-{figure.ci_high * 1e3:.2f}, {len(m.runs)} runs)"
            )
        measured = all(r.measurement is not None for r in firsts) and len(firsts) > 1
        where = f"{c.model} {c.task} b{c.batch_size} {c.precision or 'fp32'}"
        ctx.say(
            Line(
                check,
                "PASS" if measured else "FAIL",
                f"{claim}: {where}",
                "; ".join(shown) + f" -> {row.verdict()}",
                {"results": [_compact(r.to_record()) for r in firsts]},
            )
        )


FLAX_MODELS = ("resnet50", "mobilenet_v2", "vgg16", "resnet18", "resnet152")


def check_flax(ctx: Context) -> None:
    """Flax NNX (jit) against PyTorch (eager) on the ASU networks Flax holds, with verdicts."""
    others = [m for m in ctx.flax_models if m != "resnet50"]
    sweep = {
        "name": "flax",
        "framework": ["torch", "flax"],
        "mode": {"torch": "eager", "flax": "jit"},
        "model": ["resnet18"] if ctx.smoke else ctx.flax_models,
        "task": ["train", "infer"],
        "batch_size": 2 if ctx.smoke else 32,
        "input_size": 32 if ctx.smoke else 224,
        "precision": ["fp32", "bf16"],
        # ResNet-50 in both precisions, the others in fp32: what fits a GPU session.
        "exclude": [{"model": others, "precision": "bf16"}] if others else [],
        "device": ctx.device,
        "timing": {"min_runs": 3, "max_runs": 3, "run_time_s": 0.5, "max_warmup_s": 5},
        "timeout_s": 240,
    }
    budget = ctx.remaining() - 20
    # The sweep's own budget stops it in good order (every comparison keeps its runs)
    # before the check's time limit would kill it.
    sweep["budget"] = max(60, int(budget - 40))
    db = ctx.out / "flax.duckdb"
    try:
        _sweep(ctx, sweep, db, timeout=budget)
    except RuntimeError as exc:
        ctx.say(Line("flax", "FAIL", "PyTorch against Flax on the GPU", str(exc)))
        return
    size = f"{sweep['input_size']} px, batch {sweep['batch_size']}"
    _verdicts(ctx, "flax", db, f"PyTorch eager against Flax jit, {size}")


LLM_MODEL = "hf:gemma@2b"


def check_llm(ctx: Context) -> None:
    """Gemma 2B generate b1 bf16 from one set of weights: PyTorch against Keras on JAX."""
    model = "hf:gemma@tiny" if ctx.smoke else ctx.llm_model
    sweep = {
        "name": "llm",
        "framework": ["torch", "keras-jax"],
        "mode": {"torch": ctx.llm_torch_modes, "keras-jax": "jit"},
        "model": model,
        "task": "generate",
        "batch_size": 1,
        "input_shape": "input_ids=Bx8" if ctx.smoke else "input_ids=Bx128",
        "new_tokens": 8 if ctx.smoke else 32,
        "precision": "bf16",
        "device": ctx.device,
        "timing": {"min_runs": 3, "max_runs": 3, "run_time_s": 1},
        "timeout_s": 240,
    }
    # Gemma 2B: its weights written once (about a minute), counted in both frameworks,
    # then read again by each run (keras-hub: about a minute a run): a command of its own.
    budget = min(ctx.remaining() - 20, 480)
    sweep["budget"] = max(60, int(budget - 40))
    db = ctx.out / "llm.duckdb"
    try:
        records = _sweep(ctx, sweep, db, timeout=budget)
    except RuntimeError as exc:
        ctx.say(Line("llm", "FAIL", f"{model} generate on the GPU", str(exc)))
        return
    tokens = {
        f"{r['framework']}/{r['mode']}": (r.get("settings") or {}).get("generated_tokens")
        for r in records
    }
    same = len(records) > 1 and len({json.dumps(t) for t in tokens.values()}) == 1
    ctx.say(
        Line(
            "llm",
            "PASS" if same else "FAIL",
            f"{model}: PyTorch and Keras on JAX generate the same greedy tokens",
            json.dumps({variant: (t or [])[:1] for variant, t in tokens.items()})[:300],
        )
    )
    torch_modes = "/".join(ctx.llm_torch_modes)
    _verdicts(ctx, "llm", db, f"time per output token, PyTorch {torch_modes} against Keras-JAX jit")


def _compact(r: dict[str, Any]) -> dict[str, Any]:
    """A result without its samples and environment: small enough to commit."""
    keep = (
        "framework", "mode", "model", "task", "batch_size", "dims", "task_dims", "inputs",
        "precision", "layout", "autotune", "strategy", "world_size", "status", "error",
        "param_count", "step_time_s", "figures", "throughput", "first_step_s",
        "warmup_steps", "steps_per_block", "stop_reason", "memory", "energy", "work",
        "warnings",
    )  # fmt: skip
    return {k: r.get(k) for k in keep}


CHECKS: dict[str, tuple[float, Callable[[Context], None]]] = {
    # name: (a generous estimate of its seconds on an H100 machine, the check)
    "env": (10, check_env),
    "peak": (60, check_peak),
    "sync": (60, check_sync),
    "memory": (45, check_memory),
    "energy": (120, check_energy),
    "modes": (240, check_modes),
    "ddp": (45, check_ddp),
    "keras": (120, check_keras),
    "explain": (45, check_explain),
    "runtimes": (60, check_runtimes),
    "figures": (120, check_figures),
    "llm": (420, check_llm),
    "flax": (200, check_flax),
}


def parse_names(text: str | None) -> list[str]:
    if not text:
        return []
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise SystemExit(
            f"gpu_check: unknown check {unknown[0]!r}; valid choices: {', '.join(CHECKS)}"
        )
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="Folder for the JSON, log and dbs (required).")
    p.add_argument("--budget-s", type=float, default=540.0, help="Stop starting checks after.")
    p.add_argument("--only", help=f"Comma-separated checks to run: {', '.join(CHECKS)}.")
    p.add_argument("--skip", help="Comma-separated checks to leave out.")
    p.add_argument("--list", action="store_true", help="List the checks and exit.")
    p.add_argument(
        "--smoke", action="store_true", help="Run the checks on the CPU at toy sizes (no GPU)."
    )
    p.add_argument(
        "--flax-models",
        help=f"Comma-separated models the flax check sweeps (default {','.join(FLAX_MODELS)}).",
    )
    p.add_argument("--llm-model", help=f"The llm check's decoder (default {LLM_MODEL}).")
    p.add_argument(
        "--llm-torch-modes",
        help="Comma-separated PyTorch modes the llm check times (default eager; compile "
        "adds the static cache under torch.compile).",
    )
    a = p.parse_args(argv)
    if a.list:
        for name, (estimate, fn) in CHECKS.items():
            print(f"{name:<8} ~{estimate:.0f} s  {(fn.__doc__ or '').strip()}")
        return 0
    if a.out is None:
        raise SystemExit("gpu_check: --out DIR is required (where the record and log go)")
    if a.budget_s <= 0:
        raise SystemExit(f"gpu_check: --budget-s must be positive, got {a.budget_s}")
    only, skip = parse_names(a.only), parse_names(a.skip)
    a.out.mkdir(parents=True, exist_ok=True)
    ctx = Context(a.out, a.budget_s, sys.executable, smoke=a.smoke)
    if a.flax_models:
        ctx.flax_models = [m.strip() for m in a.flax_models.split(",") if m.strip()]
    if a.llm_model:
        ctx.llm_model = a.llm_model
    if a.llm_torch_modes:
        ctx.llm_torch_modes = [m.strip() for m in a.llm_torch_modes.split(",") if m.strip()]
    selected = [n for n in CHECKS if (not only or n in only) and n not in skip]
    if "env" not in selected:
        selected.insert(0, "env")  # the GPU's name decides the datasheet figures
    for name in selected:
        estimate, check = CHECKS[name]
        if ctx.remaining() < estimate * 0.5:
            ctx.say(Line(name, "SKIP", "whole check", f"{ctx.remaining():.0f} s left"))
            continue
        started = time.monotonic()
        try:
            check(ctx)
        except Exception as exc:
            ctx.say(Line(name, "ERROR", "the check itself failed", f"{type(exc).__name__}: {exc}"))
        ctx.record.setdefault("durations_s", {})[name] = round(time.monotonic() - started, 1)
        ctx.save()
    for db in (ctx.db, ctx.figures_db):
        if db.exists():
            export = db.with_name(f"{db.stem}-results.json")
            ctx.fwbench("export", "--db", str(db), "-o", str(export), timeout=60)
    counts = {s: sum(1 for line in ctx.lines if line.status == s) for s in ("PASS", "FAIL")}
    errors = sum(1 for line in ctx.lines if line.status == "ERROR")
    print(f"gpu-check: {counts['PASS']} passed, {counts['FAIL']} failed, {errors} errors")
    return 1 if counts["FAIL"] or errors else 0


if __name__ == "__main__":
    # Workers must not inherit a CUDA_VISIBLE_DEVICES="" from a CPU-only shell by accident.
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        raise SystemExit("gpu_check: CUDA_VISIBLE_DEVICES is empty: no GPU is visible")
    sys.exit(main())
