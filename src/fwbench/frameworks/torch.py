"""PyTorch adapter: eager or TorchScript, CUDA synchronisation when on GPU."""

from __future__ import annotations

import inspect
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec, Optimizer, ctc_label_length, get_model
from fwbench.explain.kernels import read_events
from fwbench.explain.timeline import WINDOW, Event, Window
from fwbench.frameworks import generation
from fwbench.frameworks.base import (
    NO_FLOATS,
    Adapter,
    OutputCheck,
    OutputShapeError,
    TaskNotImplemented,
    Workload,
    check_user_logits,
    synthetic_arrays,
    tensors_in,
    workload_class,
)
from fwbench.frameworks.generation import GenerateWorkload
from fwbench.tasks import get_task

ADAM_EPS = 1e-7  # Keras' default; torch's is 1e-8: the same optimizer in both


AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


class TorchWorkload(Workload):
    def __init__(
        self, model: torch.nn.Module, case: Case, spec: ModelSpec, device: torch.device
    ) -> None:
        self.device = device
        channels_last = case.layout == "channels_last"
        memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = model.to(device)
        if channels_last:
            self.model = self.model.to(memory_format=memory_format)
        self.param_count = count_trainable(model)
        self.inputs = tuple(
            x.contiguous(memory_format=memory_format) if x.dim() == 4 else x
            for x in synthetic_inputs(case, spec, device)
        )
        self.target, self.loss_fn = objective(case, case.loss, device)
        trains = get_task(case.task).trains
        self.model.train(trains)
        # Mixed precision: autocast around forward and loss; fp16 adds loss scaling.
        dtype = AUTOCAST.get(case.precision or "")
        self.autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)
        self.scaler = torch.amp.GradScaler(device.type, enabled=case.precision == "fp16")
        self.trace_s: float | None = None
        self.check = OutputCheck(case, spec.objective, _as_array)
        self.forward: Any = self.model
        self.compiled = case.mode.startswith("compile")
        if case.mode == "script":
            # TorchScript by tracing, in the task's train/eval state; timed apart from the
            # build so trace cost never hides in the steady state.
            start = time.perf_counter()
            self.forward = torch.jit.trace(self.model, self.inputs, check_trace=False)
            self.trace_s = time.perf_counter() - start
        elif self.compiled:
            # Inductor compiles lazily, on the first step (recorded as first_step_s) and
            # again on any recompilation, which compile_count() exposes.
            options = case.mode.removeprefix("compile").removeprefix("-") or "default"
            self.forward = torch.compile(self.model, mode=options)
        self.optimizer: torch.optim.Optimizer | None = None
        if trains:
            # What trains: every parameter, or the adapters alone (task lora).
            trained = [p for p in self.model.parameters() if p.requires_grad]
            self.optimizer = make_optimizer(spec.optimizer, trained)
        self.settings_ = {
            "layout": "channels_last (NHWC)" if channels_last else "channels_first (NCHW)",
            "precision": case.precision or "fp32",
            "autocast_dtype": str(dtype) if dtype is not None else None,
            "grad_scaler": self.scaler.is_enabled(),
        }

    def step(self) -> None:
        if self.optimizer is None:
            with torch.inference_mode(), self.autocast:
                out = self.forward(*self.inputs)
            if self.check.pending:
                self.check(out)
            return
        self.optimizer.zero_grad(set_to_none=True)
        with self.autocast:
            out = self.forward(*self.inputs)
            if self.check.pending:
                self.check(out)
            loss = self.loss_fn(out, self.target)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def compile_count(self) -> int | None:
        if not self.compiled:
            return None
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])

    def settings(self) -> dict[str, Any]:
        return self.settings_

    def counters(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.trace_s is not None:
            found["torchscript_trace_s"] = self.trace_s
        if self.compiled:
            found["dynamo_graphs"] = self.compile_count()
        return found

    def sync(self) -> None:
        # CPU kernels run synchronously in eager mode: nothing is pending.
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def _as_array(tensor: torch.Tensor) -> Any:
    return tensor.detach().float().cpu().numpy()


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


def _rnn_layer_flops(
    x_shape: list[int], w_ih: list[int], w_hh: list[int], *_: Any, **__: Any
) -> int:
    """oneDNN's fused LSTM layer: every step multiplies input and state by the gate weights
    (gates x hidden rows), for every sample."""
    return 2 * x_shape[0] * x_shape[1] * w_ih[0] * (w_ih[1] + w_hh[1])


def _rnn_layer_backward_flops(
    x_shape: list[int], w_ih: list[int], w_hh: list[int], *_: Any, **__: Any
) -> int:
    # Gradients of input, state and both weights: twice the forward products.
    return 2 * _rnn_layer_flops(x_shape, w_ih, w_hh)


def _sdpa_cpu_flops(q_shape: Any, k_shape: Any, v_shape: Any, *_: Any, **__: Any) -> int:
    """The CPU's fused attention kernel does the products of any other: q @ k^T and
    weights @ v (torch.utils.flop_counter registers the GPU kernels only)."""
    from torch.utils.flop_counter import sdpa_flop_count

    return int(sdpa_flop_count(q_shape, k_shape, v_shape))


def _sdpa_cpu_backward_flops(
    grad_shape: Any, q_shape: Any, k_shape: Any, v_shape: Any, *_: Any, **__: Any
) -> int:
    from torch.utils.flop_counter import sdpa_backward_flop_count

    return int(sdpa_backward_flop_count(grad_shape, q_shape, k_shape, v_shape))


class TorchGenerate(GenerateWorkload):
    """Greedy generation as transformers' `generate()` runs it: in eager mode through its
    dynamic key/value cache (grown by one position a token); in the
    compile modes through its static cache (`StaticCache`, allocated for the whole
    generation and reset before each), the model under `torch.compile`, whose prefill
    and decoding step are one graph each: a static cache keeps every step's shapes,
    so no token recompiles (compile_count says if one did)."""

    def __init__(
        self, model: torch.nn.Module, case: Case, spec: ModelSpec, device: torch.device
    ) -> None:
        from fwbench.models import torch_gpt

        if case.mode == "script":
            raise TaskNotImplemented(
                f"task {case.task}: TorchScript cannot trace a generation's key/value cache; "
                "mode eager (a dynamic cache) or compile (a static one) generates"
            )
        super().__init__(case)
        self.device = device
        causal: Any = model
        if isinstance(model, torch_gpt.GPT2):
            # The zoo's GPT-2: the weights every framework loads, so their tokens agree.
            torch_gpt.load_weights(model, generation.weights(case))
            causal = model.gpt
        elif not hasattr(model, "prepare_inputs_for_generation"):
            # A user's causal transformer (its own random weights) generates as it is.
            raise TaskNotImplemented(f"task {case.task}: {case.model} has no PyTorch generation")
        self.gpt = causal.eval().to(device)
        self.param_count = count_trainable(model)
        self.ids = torch.from_numpy(generation.prompt(case)).long().to(device)
        dtype = AUTOCAST.get(case.precision or "")
        self.autocast = torch.autocast(device.type, dtype=dtype, enabled=dtype is not None)
        self.past: Any = None
        # transformers 5 names the cache argument and output `cache` (`past_key_values`
        # warns there, and goes in 5.40); transformers 4 knows only `past_key_values`.
        params = inspect.signature(self.gpt.forward).parameters
        self.cache_name = "cache" if "cache" in params else "past_key_values"
        # Logits of the last position only, where the model takes it (transformers' own
        # causal models do): the prefill's other positions need none.
        self.keep = {"logits_to_keep": 1} if "logits_to_keep" in params else {}
        self.token: torch.Tensor | None = None
        self.compiled = case.mode.startswith("compile")
        self.forward: Any = self.gpt
        self.static: Any = None
        cache = "transformers DynamicCache (grows each token)"
        if self.compiled:
            from transformers import StaticCache

            context = self.prompt_len + self.new_tokens
            self.static = StaticCache(config=self.gpt.config, max_cache_len=context)
            # Positions as tensors on the device: the compiled graphs take them as inputs.
            self.positions = [torch.tensor([p], device=device) for p in range(context)]
            self.prompt_positions = torch.arange(self.prompt_len, device=device)
            options = case.mode.removeprefix("compile").removeprefix("-") or "default"
            self.forward = torch.compile(self.gpt, mode=options)
            cache = f"transformers StaticCache, {context} positions (reset each generation)"
        self.settings_ = {
            "precision": case.precision or "fp32",
            "autocast_dtype": str(dtype) if dtype is not None else None,
            **self.cache_settings(case, cache),
        }

    def _next(self, ids: torch.Tensor, positions: torch.Tensor | None = None) -> np.ndarray:
        with torch.inference_mode(), self.autocast:
            # Logits of the last position only, as transformers' generate() asks for: the
            # prefill's other positions need none.
            out = self.forward(
                input_ids=ids,
                use_cache=True,
                **self.keep,
                **{self.cache_name: self.past},
                **({"cache_position": positions} if positions is not None else {}),
            )
        if self.static is None:
            self.past = out[self.cache_name]
        self.token = out.logits[:, -1].argmax(-1)
        return self.token.cpu().numpy()

    def prefill(self) -> np.ndarray:
        if self.static is None:
            self.past = None
            return self._next(self.ids)
        with torch.inference_mode():  # its tensors were made in inference mode
            self.static.reset()
        self.past = self.static
        return self._next(self.ids, self.prompt_positions)

    def decode(self, tokens: np.ndarray, position: int) -> np.ndarray:
        assert self.token is not None
        if self.static is None:
            return self._next(self.token[:, None])
        return self._next(self.token[:, None], self.positions[position])

    def logits(self, ids: np.ndarray) -> np.ndarray | None:
        with torch.inference_mode(), self.autocast:
            # The model as written, not its compiled graphs: those are shaped for the cache.
            out = self.gpt(input_ids=torch.from_numpy(ids).long().to(self.device), use_cache=False)
        return np.asarray(out.logits.float().cpu().numpy())

    def compile_count(self) -> int | None:
        if not self.compiled:
            return None
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])

    def counters(self) -> dict[str, Any]:
        compiled = {"dynamo_graphs": self.compile_count()} if self.compiled else {}
        return compiled | super().counters()


class MatmulWorkload(Workload):
    def __init__(self, device: torch.device, dtype: str, n: int) -> None:
        torch_dtype = {
            "fp32": torch.float32,
            "tf32": torch.float32,
            "bf16": torch.bfloat16,
            "fp16": torch.float16,
        }
        self.device = device
        # fp32 is IEEE fp32 on the tensor cores' GPUs too; tf32 is asked for by name.
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        self.a = torch.randn(n, n, device=device, dtype=torch_dtype[dtype])
        self.b = torch.randn(n, n, device=device, dtype=torch_dtype[dtype])
        self.param_count = 0

    def step(self) -> None:
        torch.mm(self.a, self.b)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def synthetic_inputs(case: Case, spec: ModelSpec, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The case's inputs (frameworks.base.synthetic_arrays: the same values in every
    framework) as PyTorch takes them: images NCHW (channels-last is a memory format, set
    by the workload), token ids int64."""
    made = []
    for tensor, values in synthetic_arrays(case, spec):
        found = torch.from_numpy(values).to(device)
        made.append(found.to(torch.bfloat16) if tensor.dtype == "bfloat16" else found)
    return tuple(made)


Loss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def objective(case: Case, name: str, device: torch.device) -> tuple[torch.Tensor, Loss]:
    """Synthetic targets and the loss of the model's objective (see ModelSpec.objective)."""
    if case.inputs is not None:
        return torch.zeros((), device=device), UserLoss(name, case.batch_size, device)
    b = case.batch_size
    if name == "classify":
        target = torch.randint(0, case.dim("num_classes"), (b,), device=device)
        return target, F.cross_entropy
    if name == "lm":
        target = torch.randint(0, case.dim("vocab_size"), (b, case.dim("seq_len")))

        def lm_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return F.cross_entropy(logits.flatten(0, 1), y.flatten())

        return target.to(device), lm_loss
    # ctc: labels 1..C-1 (0 is the blank), ctc_label_length(seq_len) of them per sample.
    labels = ctc_label_length(case.dim("seq_len"))
    target = torch.randint(1, case.dim("num_classes"), (b, labels), device=device)

    def ctc_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        frames = logits.shape[1]
        log_probs = logits.log_softmax(-1).transpose(0, 1)  # (frames, batch, classes)
        frame_lengths = torch.full((y.shape[0],), frames, dtype=torch.long)
        label_lengths = torch.full((y.shape[0],), y.shape[1], dtype=torch.long)
        # Mean over the batch of each sample's loss: TensorFlow's tf.nn.ctc_loss reduction.
        return F.ctc_loss(
            log_probs, y, frame_lengths, label_lengths, blank=0, reduction="none"
        ).mean()

    return target, ctc_loss


class UserLoss:
    """A user's model's loss (USER_OBJECTIVES): the mean of its floating-point outputs,
    or cross-entropy of its first output (logits: batch x classes, or batch x positions x
    vocabulary) against random labels, whose range is read from those logits the first
    time (a fixed seed: the same labels in every run)."""

    def __init__(self, name: str, batch: int, device: torch.device) -> None:
        self.name, self.batch, self.device = name, batch, device
        self.labels: torch.Tensor | None = None

    def __call__(self, out: Any, _: torch.Tensor) -> torch.Tensor:
        found = tensors_in(out)
        if self.name == "mean":
            floats = [t for t in found if t.is_floating_point()]
            if not floats:
                raise OutputShapeError(NO_FLOATS)
            return torch.stack([t.float().mean() for t in floats]).sum()
        logits = found[0].float()
        check_user_logits(self.name, self.batch, tuple(logits.shape))
        if self.labels is None:
            generator = torch.Generator().manual_seed(0)
            shape = tuple(logits.shape[:-1])
            self.labels = torch.randint(0, logits.shape[-1], shape, generator=generator)
            self.labels = self.labels.to(self.device)
        return F.cross_entropy(logits.flatten(0, -2), self.labels.flatten())


def make_optimizer(opt: Optimizer, params: Any) -> torch.optim.Optimizer:
    if opt.name == "adam":
        return torch.optim.Adam(params, lr=opt.learning_rate, eps=ADAM_EPS)
    if opt.name == "adamw":
        return torch.optim.AdamW(
            params, lr=opt.learning_rate, eps=ADAM_EPS, weight_decay=opt.weight_decay
        )
    return torch.optim.SGD(params, lr=opt.learning_rate, momentum=opt.momentum)


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
            "inference_grad_mode": "torch.inference_mode",
            "mkldnn_enabled": bool(torch.backends.mkldnn.enabled),
        }
        return settings

    def compile_cache(self, directory: str, case: Case) -> dict[str, Any]:
        # Read when torch.compile first compiles, not at import: the fork server's torch
        # takes them. Left to itself, inductor shares one cache across all commands, so
        # a compiled case's first step would depend on what ran before.
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(directory, "inductor")
        os.environ["TRITON_CACHE_DIR"] = os.path.join(directory, "triton")
        if not case.mode.startswith("compile"):
            return {}  # eager and TorchScript modes use neither cache
        self.compiling = True
        return {
            "compile_cache": f"inductor's FX graph and AOTAutograd caches, Triton's, in {directory}"
        }

    def compile_cache_state(self) -> dict[str, Any]:
        if not getattr(self, "compiling", False):
            return {}
        from torch._dynamo.utils import counters

        found = counters["inductor"]
        hits, misses = int(found["fxgraph_cache_hit"]), int(found["fxgraph_cache_miss"])
        return {"compile_cache_hits": hits, "compile_cache_misses": misses}

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

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        return get_model(model).build("torch", dims)

    def count_params(self, model: Any) -> int:
        return count_trainable(model)

    def model_shapes(self, build: Callable[[], Any]) -> Any:
        # Parameters on the meta device: shapes without memory or initialization.
        with torch.device("meta"):
            return build()

    def build(self, case: Case) -> Workload:
        # The task's workload class (the registry entry's map), constructed as
        # cls(model, case, spec, device): a plugin's class for a new task follows it.
        cls = workload_class(self.name, case)
        device = torch.device("cuda:0" if case.device == "cuda" else "cpu")
        cuda = pin_cuda_numerics(case)
        spec = case.model_spec
        model = self.build_model(case.reference, case.dims)
        workload = cls(model, case, spec, device)
        if cuda:
            workload.settings_ = {**getattr(workload, "settings_", {}), **cuda}
        built: Workload = workload
        return built

    def reset_device_memory(self, device: str) -> None:
        reset_cuda_peaks(device)

    def device_memory(self, device: str) -> dict[str, int] | None:
        return cuda_peaks(device)

    def count_flops(self, workload: Workload) -> tuple[float, str]:
        from torch.utils.flop_counter import FlopCounterMode

        mapping: dict[Any, Any] = {torch.ops.aten.convolution_backward: _conv_backward_flops}
        if hasattr(torch.ops.aten, "mkldnn_rnn_layer"):
            mapping[torch.ops.aten.mkldnn_rnn_layer] = _rnn_layer_flops
            mapping[torch.ops.aten.mkldnn_rnn_layer_backward] = _rnn_layer_backward_flops
        if hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu"):
            aten = torch.ops.aten
            mapping[aten._scaled_dot_product_flash_attention_for_cpu] = _sdpa_cpu_flops
            mapping[aten._scaled_dot_product_flash_attention_for_cpu_backward] = (
                _sdpa_cpu_backward_flops
            )
        # The fused attention fast path of inference is one opaque op; the same products
        # run through it and through the path counted here.
        fastpath = torch.backends.mha.get_fastpath_enabled()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
                workload.step()
            workload.sync()
        finally:
            torch.backends.mha.set_fastpath_enabled(fastpath)
        method = "torch.utils.flop_counter (conv, RNN, CPU attention fixes)"
        return float(counter.get_total_flops()), method

    def profile(
        self, workload: Workload, steps: int, trace_path: str | None
    ) -> tuple[str, list[Event], Window, str | None]:
        assert isinstance(workload, TorchWorkload | TorchGenerate)
        return profile_torch(workload, workload.device.type == "cuda", steps, trace_path)

    def matmul(self, device: str, dtype: str, n: int) -> Workload:
        return MatmulWorkload(torch.device("cuda:0" if device == "cuda" else "cpu"), dtype, n)

    def is_unsupported(self, exc: BaseException) -> bool:
        # "\"addmm_impl_cpu_\" not implemented for 'Half'": no kernel for this dtype here.
        return isinstance(exc, RuntimeError) and " not implemented for " in str(exc)

    def is_oom(self, exc: BaseException) -> bool:
        if isinstance(exc, torch.OutOfMemoryError):
            return True
        text = str(exc)
        return isinstance(exc, RuntimeError) and (
            "can't allocate memory" in text or "not enough memory" in text
        )


def pin_cuda_numerics(case: Case) -> dict[str, Any]:
    """On a GPU, what PyTorch computes fp32 in, set from the case and returned to be
    recorded (none on the CPU): fp32 means fp32 (METHODOLOGY rule 8), TF32 only when the
    case asks for it (PyTorch's own default runs cuDNN's convolutions in TF32); cuDNN's
    algorithm search only when asked (its first steps are the search). For every
    framework that computes with PyTorch: its own adapter and Keras on it."""
    if case.device != "cuda":
        return {}
    import torch

    torch.backends.cuda.matmul.allow_tf32 = case.precision == "tf32"
    torch.backends.cudnn.allow_tf32 = case.precision == "tf32"
    torch.backends.cudnn.benchmark = bool(case.autotune)
    return {
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
    }


def reset_cuda_peaks(device: str) -> None:
    """Start PyTorch's CUDA allocator peaks afresh (a no-op off CUDA); Keras on PyTorch
    allocates through the same allocator."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def cuda_peaks(device: str) -> dict[str, int] | None:
    """PyTorch's CUDA allocator peaks since the last reset (None off CUDA)."""
    if device != "cuda":
        return None
    return {
        "allocated_peak_bytes": int(torch.cuda.max_memory_allocated()),
        "reserved_peak_bytes": int(torch.cuda.max_memory_reserved()),
    }


def profile_torch(
    workload: Workload, on_gpu: bool, steps: int, trace_path: str | None
) -> tuple[str, list[Event], Window, str | None]:
    """`steps` of `workload`'s steps under torch.profiler, then its sync: its ops (on the
    CPU) or kernels (on a GPU, each with the op that launched it), each with its
    ancestors, and a generation's phases (generation.phases_marked). PyTorch's own
    workloads and Keras-on-PyTorch's alike."""
    from torch.profiler import ProfilerActivity, profile, record_function

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with (
        generation.phases_marked(workload, record_function),
        profile(activities=activities) as prof,
        record_function(WINDOW),
    ):
        for _ in range(steps):
            workload.step()
        workload.sync()
    if trace_path:
        prof.export_chrome_trace(trace_path)
    events, window = read_events(list(prof.events()), on_gpu)
    return "torch.profiler", events, window, trace_path
