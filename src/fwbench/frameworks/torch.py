"""PyTorch adapter: torchvision models, eager mode, CUDA synchronisation when on GPU."""

from __future__ import annotations

import math
import time
from typing import Any

import torch
import torch.nn.functional as F

from fwbench.case import Case
from fwbench.explain.timeline import Event
from fwbench.frameworks.base import Adapter, Workload
from fwbench.models.registry import get_model

LEARNING_RATE = 0.01
WINDOW = "fwbench_window"
MOMENTUM = 0.9


class TorchWorkload(Workload):
    def __init__(self, model: torch.nn.Module, case: Case, device: torch.device) -> None:
        self.model = model.to(device)
        self.param_count = count_trainable(model)
        self.device = device
        self.x = torch.randn(case.batch_size, 3, case.input_size, case.input_size, device=device)
        self.y = torch.randint(0, case.num_classes, (case.batch_size,), device=device)
        self.model.train(case.task == "train")
        self.trace_s: float | None = None
        self.forward: Any = self.model
        if case.mode == "script":
            # TorchScript by tracing, in the task's train/eval state; timed apart from the
            # build so trace cost never hides in the steady state.
            start = time.perf_counter()
            self.forward = torch.jit.trace(self.model, (self.x,), check_trace=False)
            self.trace_s = time.perf_counter() - start
        self.optimizer: torch.optim.Optimizer | None = None
        if case.task == "train":
            self.optimizer = torch.optim.SGD(
                self.forward.parameters(), lr=LEARNING_RATE, momentum=MOMENTUM
            )

    def step(self) -> None:
        if self.optimizer is None:
            with torch.inference_mode():
                self.forward(self.x)
            return
        self.optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.forward(self.x), self.y)
        loss.backward()
        self.optimizer.step()

    def counters(self) -> dict[str, Any]:
        return {} if self.trace_s is None else {"torchscript_trace_s": self.trace_s}

    def sync(self) -> None:
        # CPU kernels run synchronously in eager mode: nothing is pending.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _conv_backward_flops(
    grad_out_shape: list[int],
    x_shape: list[int],
    w_shape: list[int],
    _bias: Any,
    _stride: Any,
    _padding: Any,
    _dilation: Any,
    transposed: bool,
    _output_padding: Any,
    _groups: int,
    output_mask: list[bool],
    out_shape: Any = None,
    **_: Any,
) -> int:
    """Each gradient asked for is one product as large as the forward convolution.

    torch.utils.flop_counter's own formula counts the weight gradient of a grouped
    (depthwise) convolution as if it were dense, by the group count too much; this one
    is exact for any groups, and equal to it for ordinary convolutions.
    """
    activation = x_shape if transposed else grad_out_shape
    forward = 2 * math.prod(activation) * math.prod(w_shape[1:])
    return forward * (int(output_mask[0]) + int(output_mask[1]))


class MatmulWorkload(Workload):
    def __init__(self, device: torch.device, dtype: str, n: int) -> None:
        torch_dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
        self.device = device
        self.a = torch.randn(n, n, device=device, dtype=torch_dtype[dtype])
        self.b = torch.randn(n, n, device=device, dtype=torch_dtype[dtype])
        self.param_count = 0

    def step(self) -> None:
        torch.mm(self.a, self.b)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def count_trainable(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


class TorchAdapter(Adapter):
    name = "torch"

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        torch.set_num_threads(threads)
        torch.set_num_interop_threads(threads)
        settings: dict[str, Any] = {
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "layout": "channels_first (NCHW)",
            "dtype": "float32",
            "inference_grad_mode": "torch.inference_mode",
            "optimizer": f"SGD(lr={LEARNING_RATE}, momentum={MOMENTUM})",
            "loss": "cross_entropy on logits",
            "mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
        }
        if device == "cuda":
            # fp32 means fp32: TF32 is pinned off in every framework (METHODOLOGY rule 8).
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.backends.cudnn.benchmark = False
            settings |= {
                "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
                "tf32_cudnn": torch.backends.cudnn.allow_tf32,
                "cudnn_benchmark": torch.backends.cudnn.benchmark,
                "cudnn_deterministic": torch.backends.cudnn.deterministic,
            }
        return settings

    def unavailable_reason(self, device: str) -> str | None:
        if device == "cuda" and not torch.cuda.is_available():
            return "PyTorch sees no CUDA device on this machine"
        return None

    def environment(self, device: str) -> dict[str, Any]:
        import torchvision

        env: dict[str, Any] = {
            "torch": torch.__version__,
            "torchvision": torchvision.__version__,
            "torch_cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version()
            if torch.backends.cudnn.is_available()
            else None,
            "parallel_info": torch.__config__.parallel_info().strip().splitlines()[:6],
        }
        if device == "cuda" and torch.cuda.is_available():
            env["device_name"] = torch.cuda.get_device_name(0)
        return env

    def build_model(self, model: str, num_classes: int, input_size: int) -> Any:
        return get_model(model).builder("torch")(num_classes, input_size)

    def count_params(self, model: Any) -> int:
        return count_trainable(model)

    def build(self, case: Case) -> Workload:
        device = torch.device("cuda:0" if case.device == "cuda" else "cpu")
        model = self.build_model(case.model, case.num_classes, case.input_size)
        return TorchWorkload(model, case, device)

    def reset_device_memory(self, device: str) -> None:
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()

    def device_memory(self, device: str) -> dict[str, int] | None:
        if device != "cuda":
            return None
        return {
            "allocated_peak_bytes": int(torch.cuda.max_memory_allocated()),
            "reserved_peak_bytes": int(torch.cuda.max_memory_reserved()),
        }

    def count_flops(self, workload: Workload) -> tuple[float, str]:
        from torch.utils.flop_counter import FlopCounterMode

        mapping = {torch.ops.aten.convolution_backward: _conv_backward_flops}
        with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
            workload.step()
        workload.sync()
        return float(counter.get_total_flops()), "torch.utils.flop_counter (grouped-conv fix)"

    def profile(
        self, workload: Workload, steps: int, trace_path: str | None
    ) -> tuple[str, list[Event], tuple[float, float], str | None]:
        from torch.profiler import ProfilerActivity, profile, record_function

        assert isinstance(workload, TorchWorkload)
        on_gpu = workload.device.type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
        with profile(activities=activities) as prof, record_function(WINDOW):
            for _ in range(steps):
                workload.step()
            workload.sync()
        if trace_path:
            prof.export_chrome_trace(trace_path)
        events: list[Event] = []
        window = (0.0, 0.0)
        for ev in prof.events():
            start, end = ev.time_range.start * 1e-6, ev.time_range.end * 1e-6
            if ev.name == WINDOW:
                window = (start, end)
                continue
            is_gpu = ev.device_type.name == "CUDA"
            if is_gpu != on_gpu:  # GPU cases: the kernels' timeline; CPU cases: the ops'
                continue
            ancestors, parent = [], ev.cpu_parent
            while parent is not None and parent.name != WINDOW:
                ancestors.append(parent.name)
                parent = parent.cpu_parent
            text = "|".join([*reversed(ancestors), ev.name])
            thread = f"gpu:{ev.device_index}" if is_gpu else f"cpu:{ev.thread}"
            events.append(Event(thread, start, end, ev.name, text))
        return "torch.profiler", events, window, trace_path

    def matmul(self, device: str, dtype: str, n: int) -> Workload:
        return MatmulWorkload(torch.device("cuda:0" if device == "cuda" else "cpu"), dtype, n)

    def is_oom(self, exc: BaseException) -> bool:
        if isinstance(exc, torch.OutOfMemoryError):
            return True
        text = str(exc)
        return isinstance(exc, RuntimeError) and (
            "can't allocate memory" in text or "not enough memory" in text
        )
