"""Framework metadata that the CLI can read without importing any framework.

A new framework is one adapter module plus one entry here: this entry is the only place
outside `frameworks/` (and the model builders) that knows the framework — its modes,
precisions, defaults, chart colour, what it can do (count FLOPs, be explained, measure
a peak) and its data-parallel strategies. Callers check the capabilities before any
work starts, so a request a framework cannot serve is refused with the reason, never
measured and then failed (`Capability.check`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

from fwbench.tasks.generate import GENERATE
from fwbench.tasks.infer import INFER
from fwbench.tasks.lora import LORA
from fwbench.tasks.train import TRAIN


@dataclass(frozen=True)
class Strategy:
    name: str
    label: str
    # "per_replica": one process per replica (DDP, MultiWorkerMirroredStrategy);
    # "one": one process driving several devices (DataParallel, MirroredStrategy).
    processes: Literal["per_replica", "one"]
    devices: tuple[str, ...]  # where it can run; elsewhere a case is recorded unsupported
    modes: tuple[str, ...]
    batch_semantics: str  # how the framework's API takes the batch, for the record
    # How its processes start (fwbench.launch.rank_group): torchrun; one worker per
    # replica, each with its TF_CONFIG; or one worker driving every device.
    launch: Literal["torchrun", "tf_config", "single"] = "single"
    framework: str = ""  # filled in from the entry it is listed on
    # Set in its processes' environment before the framework starts, "{replicas}" filled
    # in, appended to a value already there (jax.sharding on a CPU: XLA's host devices).
    env: tuple[tuple[str, str], ...] = ()

    def env_for(self, replicas: int, base: Mapping[str, str]) -> dict[str, str]:
        found = {}
        for name, template in self.env:
            value = template.format(replicas=replicas)
            found[name] = f"{base[name]} {value}" if base.get(name) else value
        return found

    def process_count(self, world_size: int) -> int:
        return world_size if self.processes == "per_replica" else 1


@dataclass(frozen=True)
class Setting:
    """A framework-specific switch an expert would try (`--options NAME=VALUE`, a sweep's
    `options`, and `tune`): part of a case's identity, applied before the framework loads
    (an environment variable of the worker) or by the adapter, and recorded. Left out, the
    framework decides, as it does for its users."""

    name: str
    values: tuple[str, ...]
    help: str
    env: str | None = None  # the worker's environment variable that applies it
    env_values: tuple[tuple[str, str], ...] = ()  # value -> the variable's value
    tasks: tuple[str, ...] = ()  # the tasks it applies to (none named: every task)
    modes: tuple[str, ...] = ()  # the modes it applies to (none named: every mode)
    # The value the framework takes when the setting is left out, where that is fixed
    # (None where the framework decides by the machine, as TensorFlow's oneDNN does):
    # `tune` tries that value as the case without the setting, never as a second case
    # doing the same work under another name.
    default: str | None = None

    def __post_init__(self) -> None:
        if self.default is not None and self.default not in self.values:
            raise ValueError(f"setting {self.name}: default {self.default} not in {self.values}")

    def applies(self, task: str, mode: str | None = None) -> bool:
        """Whether it applies to `task` (and to `mode`, where one is given)."""
        if self.tasks and task not in self.tasks:
            return False
        return mode is None or not self.modes or mode in self.modes

    def scope(self) -> str:
        """Where it applies, in words ("task generate", "mode jit"; "" for everywhere)."""
        where = [f"task {'|'.join(self.tasks)}"] if self.tasks else []
        where += [f"mode {'|'.join(self.modes)}"] if self.modes else []
        return ", ".join(where)

    def env_value(self, value: str) -> str:
        return dict(self.env_values).get(value, value)


# A generation's decoding steps in a Keras backend that compiles (keras-hub's decoders):
# each its own call, its token read back as it is made (stream: what fwbench does
# everywhere, a streaming server's loop), or all of them one compiled loop whose tokens
# are read at its end (loop: how keras-hub's own generate() runs them). Left out: stream.
DECODING = Setting(
    "decoding",
    ("stream", "loop"),
    "a generation's decoding steps: each its own compiled call, each token read back as "
    "it is made (stream, the default), or one compiled loop, the tokens read at its end "
    "(loop, as keras-hub's generate() runs them; time per output token is the loop's "
    "time over its steps)",
    tasks=(GENERATE.name,),
    default="stream",
)


# What a Flax `jit` step passes to jax.jit and gets back: the State of nnx.Variable objects
# that nnx.split gives (variables: Flax's performance guide's functional loop), which JAX
# flattens in Python, a Variable at a time, on every call, or the same State's arrays
# alone (arrays: nnx.as_pure), whose Variables need no flattening (the State itself is
# still flattened in Python). The program is the same; only the call's cost differs.
# Left out: variables.
FLAX_STATE = Setting(
    "state",
    ("variables", "arrays"),
    "what a jit step passes to jax.jit and gets back: the State of nnx.Variables that "
    "nnx.split gives, as Flax's performance guide writes it (variables, the default; JAX "
    "flattens it in Python on every call), or its arrays alone (arrays: nnx.as_pure)",
    modes=("jit",),
    default="variables",
)


@dataclass(frozen=True)
class Capability:
    """Something a framework can do, or the reason it cannot."""

    available: bool = True
    reason: str = ""

    def check(self, framework: str, what: str) -> None:
        if not self.available:
            from fwbench.errors import SpecError

            raise SpecError(f"{what}: {framework} cannot: {self.reason}")


NO = Capability  # NO(False, "why") reads as what it says at the entries below


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    label: str
    modes: tuple[str, ...]
    devices: tuple[str, ...]
    # Top-level packages the adapter needs; checked with find_spec, never imported here.
    packages: tuple[str, ...]
    adapter_path: str  # "module:Class", imported only inside a worker
    # Distribution names the framework may be installed under (CPU and CUDA flavours).
    distributions: tuple[str, ...]
    # Modes that need a CUDA device, and why.
    cuda_modes: tuple[tuple[str, str], ...] = ()
    native_layout: str = "channels_first"
    # Image layouts a case may ask for (a runtime fixed to its exported graph offers one).
    layouts: tuple[str, ...] = ("channels_first", "channels_last")
    # Its documented fast path: the mode of every case that names none, in every command
    # (fwbench.case.default_mode), and of "default vs default" comparisons.
    default_mode: str = "eager"
    # Modes that run the model op by op as written, without a compiled graph: a verdict
    # between one of these and a compiled mode says so.
    eager_modes: tuple[str, ...] = ("eager",)
    # Modes that compute in other numerics than the case's precision, and what they
    # compute in (a runtime's quantised weights): a verdict between one of these and a
    # framework computing otherwise says so (fwbench.case.execution_note).
    mode_numerics: tuple[tuple[str, str], ...] = ()
    # Its own switches a case may set (fwbench.case: `options`), and tune tries.
    settings: tuple[Setting, ...] = ()
    # Precisions it implements; models built by another framework's builders (the Keras
    # 3 builders, registered under "tensorflow", serve every Keras backend).
    precisions: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
    models_from: str | None = None
    # Whose compute kernels it runs, when another framework's (`fwbench peak` skips it).
    kernels_of: str | None = None
    # In the frameworks a sweep, `explain` or `tune` uses when none are named.
    core: bool = False
    colour: str = "#4C72B0"  # one colour everywhere a chart shows it
    # Precisions a mode cannot run, and why: (mode, precisions, reason).
    mode_exclusions: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    # Modes `tune` leaves out unless asked for (their compile takes minutes).
    slow_modes: tuple[str, ...] = ()
    # What `fwbench explain` writes its raw trace as (a file suffix, or a folder's).
    trace_suffix: str = ".trace"
    # The tasks its adapter implements (fwbench.tasks), each with the workload class that
    # does the task's step ("module:Class", imported in a worker only; the adapter
    # constructs it). The framework supports exactly these tasks; any other is refused
    # before work, with its reason in `task_reasons` or a default one.
    workloads: tuple[tuple[str, str], ...] = ()
    task_reasons: tuple[tuple[str, str], ...] = ()
    counts_flops: Capability = Capability()
    can_explain: Capability = Capability()
    can_measure_peak: Capability = Capability()
    # The module that builds its data-parallel workloads (fwbench.distributed.*), and the
    # strategies it offers (fwbench.catalog.strategies indexes them by name).
    data_parallel: str | None = None
    strategies: tuple[Strategy, ...] = ()
    # Modules a fork server imports after the adapter module, so forked workers start
    # with them loaded (fwbench.launch.forkserver). Importing them must start no thread
    # and initialise no device.
    preload: tuple[str, ...] = ()
    # Whether GPU cases may fork their workers from a fork server too: only where the
    # server's imports were seen to leave the GPU driver untouched and forked workers
    # were seen to use the GPU (docs/gpu.md). The server checks the first on every start.
    forks_on_cuda: bool = False

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks it implements: those it has a workload class for."""
        return tuple(task for task, _ in self.workloads)

    def workload_path(self, task: str) -> str | None:
        """Where the workload class of `task` is ("module:Class"), or None."""
        return dict(self.workloads).get(task)

    def does(self, task: str) -> Capability:
        """Whether its adapter implements `task`, or why not."""
        if task in self.tasks:
            return Capability()
        reason = dict(self.task_reasons).get(task)
        return Capability(False, reason or f"its adapter implements {', '.join(self.tasks)} only")

    def installed(self) -> bool:
        return all(importlib.util.find_spec(p) is not None for p in self.packages)

    def version(self) -> str | None:
        """Installed version, read from package metadata: nothing is imported."""
        for dist in self.distributions:
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        return None


def _exported_runtime(
    *,
    name: str,
    label: str,
    modes: tuple[str, ...],
    package: str,
    devices: tuple[str, ...] = ("cpu",),
    **given: Any,
) -> FrameworkInfo:
    """An inference runtime that runs the case's PyTorch model exported to ONNX
    (fwbench.frameworks.onnx_graph): what every such runtime is and cannot do."""
    return FrameworkInfo(
        name=name,
        label=label,
        modes=modes,
        default_mode=modes[0],
        devices=devices,
        packages=(package, "onnx", "onnxscript", "torch", "torchvision"),
        preload=("torchvision", "onnxscript"),
        layouts=("channels_first",),  # the exported graph takes NCHW images
        models_from="torch",  # the same PyTorch model, exported
        workloads=((INFER.name, "fwbench.frameworks.onnx_graph:GraphWorkload"),),
        task_reasons=(
            (TRAIN.name, f"it is an inference runtime; use task {INFER.name}"),
            (
                GENERATE.name,
                "it runs one exported forward graph, with no key/value cache to decode "
                f"through; task {INFER.name} times its prefill",
            ),
        ),
        can_explain=NO(False, "fwbench does not read its profiles yet"),
        can_measure_peak=NO(False, "fwbench has no matmul workload for it yet"),
        **given,
    )


_BUILT_IN: tuple[FrameworkInfo, ...] = (
    FrameworkInfo(
        name="torch",
        label="PyTorch",
        # compile*: torch.compile with inductor in its default, reduce-overhead and
        # max-autotune modes; script: TorchScript by tracing.
        modes=(
            "eager",
            "compile",
            "compile-reduce-overhead",
            "compile-max-autotune",
            "script",
        ),
        devices=("cpu", "cuda"),
        packages=("torch", "torchvision"),
        adapter_path="fwbench.frameworks.torch:TorchAdapter",
        workloads=(
            (TRAIN.name, "fwbench.frameworks.torch:TorchWorkload"),
            (INFER.name, "fwbench.frameworks.torch:TorchWorkload"),
            (GENERATE.name, "fwbench.frameworks.torch:TorchGenerate"),
            (LORA.name, "fwbench.frameworks.torch_lora:TorchLora"),
        ),
        preload=("torchvision",),
        forks_on_cuda=True,
        distributions=("torch",),
        cuda_modes=(
            ("compile-reduce-overhead", "its gain is CUDA graphs, which need a CUDA device"),
        ),
        native_layout="channels_first",
        core=True,
        colour="#EE4C2C",  # PyTorch orange-red
        slow_modes=("compile-max-autotune",),
        mode_exclusions=(
            (
                "script",
                ("bf16", "fp16"),
                "mixed precision needs autocast, which a TorchScript trace freezes; "
                "use mode eager or compile",
            ),
        ),
        trace_suffix=".trace.json",  # torch.profiler's Chrome trace
        data_parallel="fwbench.distributed.torch_dp",
        strategies=(
            Strategy(
                "ddp",
                "DistributedDataParallel",
                "per_replica",
                ("cpu", "cuda"),
                ("eager",),
                "per-process batch (each rank feeds its own per-replica batch)",
                launch="torchrun",
            ),
            Strategy(
                "dp",
                "DataParallel",
                "one",
                ("cuda",),
                ("eager",),
                "global batch, split across the devices by DataParallel",
            ),
        ),
    ),
    FrameworkInfo(
        name="tensorflow",
        label="TensorFlow",
        modes=("eager", "graph", "xla"),
        devices=("cpu", "cuda"),
        packages=("tensorflow", "keras"),
        adapter_path="fwbench.frameworks.tensorflow:TensorFlowAdapter",
        workloads=(
            (TRAIN.name, "fwbench.frameworks.tensorflow:TensorFlowWorkload"),
            (INFER.name, "fwbench.frameworks.tensorflow:TensorFlowWorkload"),
            (GENERATE.name, "fwbench.frameworks.keras_hub:KerasHubGenerate"),
            (LORA.name, "fwbench.frameworks.tensorflow:TensorFlowLora"),
        ),
        distributions=("tensorflow", "tensorflow-cpu", "tensorflow-gpu"),
        native_layout="channels_last",
        default_mode="graph",  # Keras' own fit() runs a tf.function
        settings=(
            DECODING,
            Setting(
                "onednn",
                ("on", "off"),
                "TensorFlow's oneDNN CPU kernels (TF_ENABLE_ONEDNN_OPTS); left out, "
                "TensorFlow turns them on only on CPUs with AVX512-VNNI, AVX512-BF16, "
                "AVX-VNNI or AMX",
                env="TF_ENABLE_ONEDNN_OPTS",
                env_values=(("on", "1"), ("off", "0")),
            ),
        ),
        core=True,
        colour="#2A7AB0",  # blue: PyTorch and TensorFlow are both orange by brand
        trace_suffix=".tensorboard",  # a TensorBoard log folder
        data_parallel="fwbench.distributed.tf_dp",
        strategies=(
            Strategy(
                "mirrored",
                "MirroredStrategy",
                "one",
                ("cpu", "cuda"),  # on a CPU over logical devices (distributed/tf_dp.py)
                ("graph",),
                "global batch (tf.distribute), fed as per-replica values; loss / replicas",
            ),
            Strategy(
                "multiworker",
                "MultiWorkerMirroredStrategy",
                "per_replica",
                ("cpu", "cuda"),
                ("graph",),
                "global batch (tf.distribute), fed as per-replica values; loss / replicas",
                launch="tf_config",
            ),
        ),
    ),
    FrameworkInfo(
        name="keras-jax",
        label="JAX (Keras 3)",
        modes=("jit", "eager"),
        devices=("cpu", "cuda"),
        packages=("jax", "keras"),
        adapter_path="fwbench.frameworks.keras_jax:KerasJaxAdapter",
        workloads=(
            (TRAIN.name, "fwbench.frameworks.keras_jax:KerasJaxWorkload"),
            (INFER.name, "fwbench.frameworks.keras_jax:KerasJaxWorkload"),
            (GENERATE.name, "fwbench.frameworks.keras_hub:KerasHubGenerate"),
            (LORA.name, "fwbench.frameworks.keras_jax:KerasJaxLora"),
        ),
        preload=("jax", "keras"),
        forks_on_cuda=True,
        distributions=("jax",),
        native_layout="channels_last",
        default_mode="jit",
        precisions=("fp32", "bf16"),
        models_from="tensorflow",
        settings=(DECODING,),
        colour="#5E97F6",  # JAX's blue-violet
        trace_suffix=".tensorboard",  # jax.profiler's log folder
        counts_flops=NO(
            False,
            "counted from its programs as Flax's are, Keras' twins would count more in "
            "training than TensorFlow's counter counts for the same model: they pad "
            "explicitly, and their input gradients cover the padding",
        ),
    ),
    FrameworkInfo(
        name="flax",
        label="JAX (Flax NNX)",
        # jit: split once, jax.jit over merge (Flax's guide's fast path); nnx-jit: nnx.jit
        # on the objects, as most code is written; eager: unjitted (frameworks/flax_nnx.py).
        modes=("jit", "nnx-jit", "eager"),
        devices=("cpu", "cuda"),
        packages=("flax", "optax", "jax"),
        adapter_path="fwbench.frameworks.flax_nnx:FlaxAdapter",
        workloads=(
            (TRAIN.name, "fwbench.frameworks.flax_nnx:FlaxWorkload"),
            (INFER.name, "fwbench.frameworks.flax_nnx:FlaxWorkload"),
            (GENERATE.name, "fwbench.frameworks.flax_nnx:FlaxGenerate"),
        ),
        data_parallel="fwbench.distributed.flax_dp",
        strategies=(
            Strategy(
                "sharded",
                "jax.sharding (a Mesh, the batch sharded over its devices)",
                "one",
                ("cpu", "cuda"),  # on a CPU over XLA's host devices (distributed/flax_dp.py)
                ("jit",),
                "global batch, sharded on its batch axis over the devices (NamedSharding); "
                "parameters and optimizer state replicated",
                env=(("XLA_FLAGS", "--xla_force_host_platform_device_count={replicas}"),),
            ),
        ),
        settings=(FLAX_STATE,),
        preload=("jax", "flax"),
        forks_on_cuda=True,
        distributions=("flax",),
        native_layout="channels_last",
        layouts=("channels_last",),
        default_mode="jit",
        precisions=("fp32", "bf16"),
        colour="#00A67E",
        trace_suffix=".tensorboard",  # jax.profiler's TensorBoard log folder
        can_measure_peak=NO(False, "keras-jax measures JAX's peak"),
    ),
    _exported_runtime(
        name="onnxruntime",
        label="ONNX Runtime",
        # Graph optimisation levels (ORT_ENABLE_ALL, ORT_ENABLE_BASIC, ORT_DISABLE_ALL) on
        # the device's execution provider (CPU, or CUDA on cuda), and TensorRT's.
        modes=("optimized", "basic", "unoptimized", "tensorrt"),
        package="onnxruntime",
        adapter_path="fwbench.frameworks.onnxruntime:OnnxRuntimeAdapter",
        distributions=("onnxruntime", "onnxruntime-gpu"),
        devices=("cpu", "cuda"),
        cuda_modes=(("tensorrt", "TensorRT is NVIDIA's GPU inference compiler"),),
        slow_modes=("tensorrt",),  # its engine build can take minutes
        precisions=("fp32", "tf32"),
        mode_exclusions=(
            (
                "tensorrt",
                ("fp32",),
                "TensorRT computes fp32 layers in TF32 unless told not to, and ONNX "
                "Runtime's TensorRT provider has no option to tell it; use --precision tf32",
            ),
        ),
        colour="#7A5195",
        settings=(
            Setting(
                "spinning",
                ("on", "off"),
                "whether its intra-op threads spin between operators (on, ONNX Runtime's "
                "default) or sleep (off: frees the cores for other work on a shared host)",
                default="on",
            ),
        ),
    ),
    _exported_runtime(
        name="openvino",
        label="OpenVINO",
        modes=("latency", "throughput"),  # its performance hints
        package="openvino",
        adapter_path="fwbench.frameworks.openvino:OpenVinoAdapter",
        distributions=("openvino",),
        precisions=("fp32", "bf16"),
        colour="#00A3A1",
    ),
    FrameworkInfo(
        name="litert",
        label="LiteRT (TF Lite)",
        # The converter's numerics: fp32, dynamic-range int8 weights, fp16 weights.
        modes=("fp32", "int8", "fp16"),
        default_mode="fp32",
        eager_modes=(),
        mode_numerics=(("int8", "dynamic-range int8"), ("fp16", "fp16 weights")),
        devices=("cpu",),
        packages=("ai_edge_litert", "tensorflow", "keras"),
        adapter_path="fwbench.frameworks.litert:LiteRtAdapter",
        distributions=("ai-edge-litert",),
        native_layout="channels_last",
        layouts=("channels_last",),  # the Keras models it converts take NHWC images
        precisions=("fp32",),  # reduced numerics are its modes: the converter's choice
        models_from="tensorflow",  # the same Keras model, converted
        workloads=((INFER.name, "fwbench.frameworks.litert:LiteRtWorkload"),),
        task_reasons=(
            (
                TRAIN.name,
                "it is an inference runtime (a converted model has no gradients); "
                f"use task {INFER.name}",
            ),
            (
                GENERATE.name,
                "it runs one converted forward graph, with no key/value cache to decode "
                f"through; task {INFER.name} times its prefill",
            ),
        ),
        settings=(
            Setting(
                "xnnpack",
                ("on", "off"),
                "LiteRT's XNNPACK delegate (on, its default on CPUs) or its builtin "
                "kernels alone (off)",
                default="on",
            ),
        ),
        colour="#3C9A5F",
        can_explain=NO(False, "fwbench does not read LiteRT's profiles yet"),
        can_measure_peak=NO(False, "fwbench has no matmul workload for it yet"),
    ),
    FrameworkInfo(
        name="keras-torch",
        label="Keras 3 on PyTorch",
        modes=("eager",),
        devices=("cpu", "cuda"),
        packages=("torch", "keras"),
        adapter_path="fwbench.frameworks.keras_torch:KerasTorchAdapter",
        workloads=(
            (TRAIN.name, "fwbench.frameworks.keras_torch:KerasTorchWorkload"),
            (INFER.name, "fwbench.frameworks.keras_torch:KerasTorchWorkload"),
            (GENERATE.name, "fwbench.frameworks.keras_hub:KerasHubGenerate"),
            (LORA.name, "fwbench.frameworks.keras_torch:KerasTorchLora"),
        ),
        preload=("keras",),
        forks_on_cuda=True,
        distributions=("keras",),
        native_layout="channels_last",
        precisions=("fp32", "bf16"),
        models_from="tensorflow",
        kernels_of="torch",
        colour="#F5A623",  # PyTorch's family, lighter
        counts_flops=NO(False, "its FLOP counter is not written yet"),
        trace_suffix=".trace.json",  # torch.profiler's Chrome trace
        can_measure_peak=NO(False, "its matmul is PyTorch's: measure torch's peak"),
    ),
)


class _Registry(Mapping[str, FrameworkInfo]):
    """Name -> FrameworkInfo: the built-in entries, then plugins' on first use."""

    def __init__(self, entries: tuple[FrameworkInfo, ...]) -> None:
        self._entries = {info.name: info for info in entries}

    def _all(self) -> dict[str, FrameworkInfo]:
        from fwbench import plugins

        plugins.load()
        return self._entries

    def __getitem__(self, name: str) -> FrameworkInfo:
        return self._all()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._all()))

    def __len__(self) -> int:
        return len(self._all())


FRAMEWORKS = _Registry(_BUILT_IN)


def register_workload(framework: str, task: str, workload: str) -> FrameworkInfo:
    """Let a framework run `task` with the workload class at `workload` ("module:Class",
    constructed as its adapter constructs its others: see the adapter's `build`): how a
    plugin adds a task to a framework without editing it (docs/adding-a-task.md)."""
    from fwbench.errors import SpecError

    info = get_framework(framework)
    if ":" not in workload:
        raise SpecError(f"workload {workload!r}: give it as module:Class")
    kept = tuple((t, w) for t, w in info.workloads if t != task)
    updated = dataclasses.replace(info, workloads=(*kept, (task, workload)))
    FRAMEWORKS._entries[info.name] = updated
    return updated


def register_framework(info: FrameworkInfo) -> FrameworkInfo:
    """Add a framework (from a plugin module, see docs/adding-a-framework.md)."""
    from fwbench.errors import SpecError

    for strategy in info.strategies:
        if strategy.framework not in ("", info.name):
            raise SpecError(f"framework {info.name!r}: strategy {strategy.name!r} is another's")
    found = FRAMEWORKS._entries.get(info.name)
    if found is not None and found != info:
        # A plugin's `torch` would silently be one of the two.
        raise SpecError(
            f"framework {info.name!r} is registered already ({found.label}); give yours a "
            "name of its own"
        )
    FRAMEWORKS._entries[info.name] = info
    return info


def core_frameworks() -> list[str]:
    """The frameworks used when none are named: the core comparison."""
    return [name for name, info in FRAMEWORKS.items() if info.core]


def get_framework(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        from fwbench.errors import SpecError

        raise SpecError(
            f"unknown framework {name!r}; valid choices: {', '.join(FRAMEWORKS)}"
        ) from None
