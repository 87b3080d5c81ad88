"""TensorFlow adapter: Keras 3 models, eager, tf.function graph or XLA mode. A user's model
(a Keras model, or a SavedModel's serving signature called as one: fwbench.models.
sources) takes its own inputs, loss and output check from what the Keras backends share
(fwbench.frameworks.keras_common)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import keras
import tensorflow as tf

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec, ctc_label_length, get_model
from fwbench.explain.timeline import PHASES, WINDOW, Event, Window
from fwbench.frameworks import generation
from fwbench.frameworks.base import Adapter, OutputCheck, Workload, tensors_in, workload_class
from fwbench.frameworks.generation import GenerateWorkload

# One optimizer table for Keras on every backend, and one way to a user's model.
from fwbench.frameworks.keras_common import (
    KerasLora,
    UserLoss,
    as_array,
    check_policy,
    make_optimizer,
    on_float32,
    synthetic_inputs,
    unweighted,
)
from fwbench.frameworks.tf_flops import dense_flops
from fwbench.tasks import get_task


class TensorFlowWorkload(Workload):
    def __init__(self, model: keras.Model, case: Case, spec: ModelSpec, device_name: str) -> None:
        self.model = model
        self.param_count = count_trainable(model)
        self.on_gpu = case.device == "cuda"
        with tf.device(device_name):
            self.x = synthetic_inputs(case, spec)
            self.y, self.loss_fn = objective(case, case.loss)
        self.optimizer: keras.optimizers.Optimizer | None = None
        if get_task(case.task).trains:
            self.optimizer = make_optimizer(spec.optimizer)
            if case.precision == "fp16":
                # Keras' dynamic loss scaling: fp16 gradients would underflow without it.
                self.optimizer = keras.optimizers.LossScaleOptimizer(self.optimizer)
            # Build the slots now: creating variables inside a traced step is an error.
            self.optimizer.build(model.trainable_variables)
            fn: Any = self._train
        else:
            fn = self._infer
        self.raw_fn = fn
        # graph: tf.function; xla: tf.function(jit_compile=True), compiled on the first call.
        self.graph = case.mode in ("graph", "xla")
        self.fn = tf.function(fn, jit_compile=case.mode == "xla") if self.graph else fn
        self.last: Any = None
        self.settings_: dict[str, Any] = {}
        self.check = OutputCheck(case, spec.objective, as_array)

    def settings(self) -> dict[str, Any]:
        return self.settings_

    def _train(self, x: Any, y: tf.Tensor) -> tf.Tensor:
        assert self.optimizer is not None
        with tf.GradientTape() as tape:
            # Mixed precision: logits may be bf16/fp16; the loss takes them in float32.
            loss = self.loss_fn(y, self.model(x, training=True))
            scaled = self.optimizer.scale_loss(loss)
        grads = tape.gradient(scaled, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
        return loss

    def _infer(self, x: Any, y: tf.Tensor) -> tf.Tensor:
        return self.model(x, training=False)

    def step(self) -> None:
        self.last = self.fn(self.x, self.y)
        # Inference returns the logits (training, the loss).
        if self.check.pending and self.optimizer is None:
            self.check(self.last)

    def sync(self) -> None:
        if self.on_gpu:
            # Waits for every queued kernel, including the optimizer update that the
            # returned loss does not depend on.
            tf.test.experimental.sync_devices()
        elif self.last is not None:
            # On CPU the step has run when the call returns; fetching its output is the
            # documented way to be sure, and costs microseconds. (A user's model may
            # return several outputs: one of them is enough.)
            tensors_in(self.last)[0].numpy()

    def counters(self) -> dict[str, Any]:
        if self.graph:
            return {"tf_function_traces": self.compile_count()}
        return {}

    def compile_count(self) -> int | None:
        return int(self.fn.experimental_get_tracing_count()) if self.graph else None


class TensorFlowLora(KerasLora, TensorFlowWorkload):
    """Task lora: keras-hub's adapters, trained as TensorFlowWorkload trains."""


def _graph_of(fn: Any, *args: Any) -> Any:
    traced = fn if hasattr(fn, "get_concrete_function") else tf.function(fn)
    return traced.get_concrete_function(*args).graph


def _sized(graph: Any) -> float:
    flops, unsized = dense_flops(graph)
    if unsized:
        raise ValueError(f"cannot size {', '.join(unsized)} ops to count their FLOPs")
    return float(flops)


def _cpu_op(name: str) -> str | None:
    """The op type of a host-plane event, or None for executor and Python frames.

    Graph ops are "scope/name:Type"; eager ops are "EagerLocalExecute: Type" (dispatch
    included: eager has no separate kernel event). Frames such as "ExecutorState::Process"
    or "KernelAndDeviceFunc::Run" are framework overhead: left out, they count as idle.
    """
    if name.startswith("EagerLocalExecute: ") and not name.startswith("EagerLocalExecute: __"):
        return name.removeprefix("EagerLocalExecute: ")
    if ":" not in name or "::" in name or ": " in name:
        return None
    return name.rsplit(":", 1)[-1]


class MatmulWorkload(Workload):
    def __init__(self, device_name: str, dtype: str, n: int) -> None:
        tf_dtype = {"bf16": tf.bfloat16, "fp16": tf.float16}.get(dtype, tf.float32)
        # TensorFlow turns TF32 on by default on GPUs: fp32 is fp32, tf32 asked by name.
        tf.config.experimental.enable_tensor_float_32_execution(dtype == "tf32")
        with tf.device(device_name):
            self.a = tf.cast(tf.random.normal((n, n)), tf_dtype)
            self.b = tf.cast(tf.random.normal((n, n)), tf_dtype)
        self.on_gpu = device_name.startswith("/GPU")
        self.fn = tf.function(tf.linalg.matmul)
        self.last: Any = None
        self.param_count = 0

    def step(self) -> None:
        self.last = self.fn(self.a, self.b)

    def sync(self) -> None:
        if self.on_gpu:
            tf.test.experimental.sync_devices()
        elif self.last is not None:
            self.last.numpy()


Loss = Callable[[tf.Tensor, tf.Tensor], tf.Tensor]


def objective(case: Case, name: str) -> tuple[tf.Tensor, Loss]:
    """Synthetic targets and the loss of the model's objective (see ModelSpec.objective),
    taking the model's output as it comes (logits in float32 for the loss)."""
    if case.inputs is not None:
        return tf.zeros(()), UserLoss(name, case.batch_size)
    b = case.batch_size
    if name == "classify":
        y = tf.random.uniform((b,), maxval=case.dim("num_classes"), dtype=tf.int32)
        return y, on_float32(
            case, name, keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
    if name == "lm":
        shape = (b, case.dim("seq_len"))
        y = tf.random.uniform(shape, maxval=case.dim("vocab_size"), dtype=tf.int32)
        return y, on_float32(
            case, name, keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
    labels = ctc_label_length(case.dim("seq_len"))
    y = tf.random.uniform((b, labels), minval=1, maxval=case.dim("num_classes"), dtype=tf.int32)

    def ctc_loss(y: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
        batch, frames = tf.shape(logits)[0], tf.shape(logits)[1]
        per_sample = tf.nn.ctc_loss(
            labels=y,
            logits=logits,
            label_length=tf.fill([batch], tf.shape(y)[1]),
            logit_length=tf.fill([batch], frames),
            logits_time_major=False,
            blank_index=0,
        )
        return tf.reduce_mean(per_sample)

    return y, on_float32(case, name, ctc_loss)


def count_trainable(model: keras.Model) -> int:
    return sum(int(v.shape.num_elements()) for v in model.trainable_weights)


class TensorFlowAdapter(Adapter):
    name = "tensorflow"

    def compile_cache(self, directory: str, case: Case) -> dict[str, Any]:
        if case.mode != "xla":
            return {}  # eager and graph modes compile no XLA program
        # XLA's persistent cache (TF_XLA_FLAGS, read at the first XLA compile, not at
        # import: the fork server's TensorFlow takes it). Files are named by the program's
        # fingerprint, so a later run loads what an earlier one compiled.
        folder = os.path.join(directory, "tf-xla")
        os.makedirs(folder, exist_ok=True)
        flags = os.environ.get("TF_XLA_FLAGS", "")
        os.environ["TF_XLA_FLAGS"] = f"{flags} --tf_xla_persistent_cache_directory={folder}"
        self.xla_cache = (folder, set(os.listdir(folder)))
        return {"compile_cache": f"XLA executables (TensorFlow's persistent cache), in {directory}"}

    def compile_cache_state(self) -> dict[str, Any]:
        found = getattr(self, "xla_cache", None)
        if found is None:
            return {}
        folder, before = found
        # TensorFlow counts no lookups: a program it compiled is written to the cache, one
        # it loaded is not. Misses are the programs written; no count of hits is recorded.
        return {"compile_cache_misses": len(set(os.listdir(folder)) - before)}

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        settings: dict[str, Any] = {
            "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
            "keras_backend": keras.backend.backend(),
        }
        for gpu in tf.config.list_physical_devices("GPU"):
            # Otherwise TensorFlow reserves all GPU memory at start (METHODOLOGY rule 14).
            tf.config.experimental.set_memory_growth(gpu, True)
        if device == "cuda":
            settings["memory_growth"] = True
        return settings

    def unavailable_reason(self, device: str) -> str | None:
        if device == "cuda" and not tf.config.list_physical_devices("GPU"):
            return "TensorFlow sees no GPU on this machine"
        return None

    def environment(self, device: str) -> dict[str, Any]:
        build = dict(tf.sysconfig.get_build_info())
        env: dict[str, Any] = {
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
            "tf_cuda": build.get("cuda_version"),
            "tf_cudnn": build.get("cudnn_version"),
            "onednn_opts_env": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
            "onednn_enabled": onednn_enabled(),
            "onednn_precisions": onednn_precisions(),
        }
        if device == "cuda":
            gpus = tf.config.list_physical_devices("GPU")
            if gpus:
                details = tf.config.experimental.get_device_details(gpus[0])
                env["device_name"] = details.get("device_name")
        return env

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        return get_model(model).build("tensorflow", dims)

    def count_params(self, model: Any) -> int:
        return count_trainable(model)

    def model_shapes(self, build: Callable[[], Any]) -> Any:
        return unweighted(build)

    def build(self, case: Case) -> Workload:
        # The task's workload class (the registry entry's map), constructed as
        # cls(model, case, spec, device_name): a plugin's class for a new task follows it.
        cls = workload_class(self.name, case)
        device_name = "/GPU:0" if case.device == "cuda" else "/CPU:0"
        spec = case.model_spec
        layout = case.layout or "channels_last"
        # Both are global Keras state, read when layers are created: set before building.
        keras.config.set_image_data_format(layout)
        policy = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}.get(case.precision or "")
        keras.mixed_precision.set_global_policy(policy or "float32")
        settings: dict[str, Any] = {
            "layout": f"{layout} ({'NCHW' if layout == 'channels_first' else 'NHWC'})",
            "precision": case.precision or "fp32",
            "keras_dtype_policy": keras.mixed_precision.global_policy().name,
            "loss_scaling": case.precision == "fp16" and get_task(case.task).trains,
        }
        if case.device == "cuda":
            # Read by cuDNN's convolution kernels when they first run (after this).
            os.environ["TF_CUDNN_USE_AUTOTUNE"] = "1" if case.autotune else "0"
            tf.config.experimental.enable_tensor_float_32_execution(case.precision == "tf32")
            settings |= {
                "tf32": tf.config.experimental.tensor_float_32_execution_enabled(),
                "cudnn_autotune": bool(case.autotune),
            }
        if (
            case.device == "cpu"
            and onednn_enabled() is False
            and "onednn" not in case.option_values
        ):
            # Not the case's choice; PyTorch's CPU kernels use oneDNN whatever the CPU.
            given = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
            why = (
                f"TF_ENABLE_ONEDNN_OPTS={given} in the environment"
                if given
                else ("its default on this CPU")
            )
            settings["warnings"] = [
                f"TensorFlow ran without oneDNN ({why}); measured on a CPU where it turns "
                "it on, oneDNN made ResNet-50 1.1x (inference) to 1.4x (training) faster: "
                "`--options onednn=on` measures TensorFlow with it"
            ]
        with tf.device(device_name):
            model = self.build_model(case.reference, case.dims)
        if case.inputs is not None:  # a user's model: the policy it computes with
            settings |= check_policy(model, case)
        # A generation's tf.functions are placed where the model is (keras_hub.py); a
        # training step places its own.
        make: Any = cls
        workload: Any
        if issubclass(cls, GenerateWorkload):
            with tf.device(device_name):
                workload = make(model, case, spec)
        else:
            workload = make(model, case, spec, device_name)
        workload.settings_ = {**getattr(workload, "settings_", {}), **settings}
        built: Workload = workload
        return built

    def reset_device_memory(self, device: str) -> None:
        if device == "cuda" and tf.config.list_physical_devices("GPU"):
            tf.config.experimental.reset_memory_stats("GPU:0")

    def device_memory(self, device: str) -> dict[str, int] | None:
        if device != "cuda" or not tf.config.list_physical_devices("GPU"):
            return None
        info = tf.config.experimental.get_memory_info("GPU:0")
        return {"allocated_peak_bytes": int(info["peak"])}

    def count_flops(self, workload: Workload) -> tuple[float, str]:
        method = "fwbench graph counter (convolutions and matmuls, from op shapes)"
        if isinstance(workload, GenerateWorkload):
            # The prefill once, then a decoding step for each token after the first (the
            # zoo's GPT-2 and a decoder keras-hub read alike).
            programs = workload.programs()
            if not programs:
                raise ValueError(f"{type(workload).__name__} gives no programs to count")
            return sum(n * _sized(_graph_of(fn, *args)) for fn, args, n in programs), method
        assert isinstance(workload, TensorFlowWorkload)
        fn = workload.fn if workload.graph else tf.function(workload.raw_fn)
        return _sized(fn.get_concrete_function(workload.x, workload.y).graph), method

    def profile(
        self, workload: Workload, steps: int, trace_path: str | None
    ) -> tuple[str, list[Event], Window, str | None]:
        import contextlib
        import glob
        import tempfile

        from tensorflow.tsl.profiler.protobuf import xplane_pb2

        # A trace nobody asked to keep is read, then removed with its directory.
        with contextlib.ExitStack() as stack:
            logdir = trace_path or stack.enter_context(
                tempfile.TemporaryDirectory(prefix="fwbench-tf-trace-")
            )
            tf.profiler.experimental.start(logdir)
            try:
                with (
                    generation.phases_marked(workload, tf.profiler.experimental.Trace),
                    tf.profiler.experimental.Trace(WINDOW),
                ):
                    for _ in range(steps):
                        workload.step()
                    workload.sync()
            finally:
                tf.profiler.experimental.stop()
            files = sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))
            space = xplane_pb2.XSpace()
            with open(files[-1], "rb") as trace:
                space.ParseFromString(trace.read())
        on_gpu = isinstance(workload, TensorFlowWorkload | GenerateWorkload) and workload.on_gpu
        events: list[Event] = []
        span = (0.0, 0.0)
        phases: dict[str, list[tuple[float, float]]] = {}
        for plane in space.planes:
            gpu_plane = plane.name.startswith("/device:GPU")
            if plane.name != "/host:CPU" and not gpu_plane:
                continue
            names = plane.event_metadata
            for line in plane.lines:
                base = line.timestamp_ns * 1e-9
                for ev in line.events:
                    name = names[ev.metadata_id].name
                    start = base + ev.offset_ps * 1e-12
                    end = start + ev.duration_ps * 1e-12
                    if name == WINDOW:
                        span = (start, end)
                    elif name in PHASES:
                        if not gpu_plane:
                            phases.setdefault(PHASES[name], []).append((start, end))
                    elif gpu_plane == on_gpu:
                        op = name if gpu_plane else _cpu_op(name)
                        if op is not None:
                            thread = f"{plane.name}:{line.id}"
                            events.append(Event(thread, start, end, op, name))
        return "tf.profiler (XPlane)", events, Window(*span, phases), trace_path

    def matmul(self, device: str, dtype: str, n: int) -> Workload:
        return MatmulWorkload("/GPU:0" if device == "cuda" else "/CPU:0", dtype, n)

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, tf.errors.ResourceExhaustedError)

    def is_unsupported(self, exc: BaseException) -> bool:
        # e.g. fp16 convolutions in NCHW on a CPU whose oneDNN has no fp16 kernels:
        # TensorFlow's own CPU kernels run NHWC only.
        if isinstance(exc, tf.errors.UnimplementedError):
            return True
        # The same limit met by a gradient kernel in graph mode, raised as an argument error.
        return isinstance(exc, tf.errors.InvalidArgumentError) and "only supports NHWC" in str(exc)

    def unsupported_context(self, device: str) -> str:
        context = super().unsupported_context(device)
        if device != "cpu":
            return context
        # TensorFlow's own CPU convolutions take NHWC only; NCHW runs through oneDNN, which
        # TensorFlow turns on by default only on some CPUs, with kernels for the types
        # this CPU can run: both decide which layouts and precisions run here.
        kernels = onednn_precisions()
        having = f", kernels for {', '.join(kernels)}" if kernels is not None else ""
        state = onednn_enabled()
        if state is True:
            context += f"; TensorFlow's oneDNN: on{having}"
        elif state is False:
            would = f"; it would have kernels for {', '.join(kernels)}" if kernels else ""
            context += f"; TensorFlow's oneDNN: off (TF_ENABLE_ONEDNN_OPTS=1 turns it on{would})"
        return context


def onednn_enabled() -> bool | None:
    """Whether TensorFlow runs its oneDNN kernels in this process (None where the build
    does not say)."""
    try:
        from tensorflow.python.util import _pywrap_util_port
    except ImportError:
        return None
    return bool(_pywrap_util_port.IsMklEnabled())


def onednn_precisions() -> list[str] | None:
    """The precisions TensorFlow's oneDNN has CPU kernels for on this CPU, in TensorFlow's
    own words (None where the build does not say)."""
    try:
        from tensorflow.python.util import _pywrap_utils
    except ImportError:
        return None
    supported = getattr(_pywrap_utils, "IsDataTypeSupportedByOneDNNOnThisCPU", None)
    if supported is None:
        return None
    types = {"fp32": tf.float32, "bf16": tf.bfloat16, "fp16": tf.float16}
    return [name for name, dtype in types.items() if supported(dtype.as_datatype_enum)]
