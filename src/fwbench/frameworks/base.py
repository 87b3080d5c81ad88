"""The interface every framework adapter implements.

An adapter runs inside a worker process (see fwbench.launch.worker): it may import its
framework at module level, and nothing outside a worker may import it.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from fwbench.case import Case
from fwbench.catalog.frameworks import get_framework
from fwbench.catalog.inputs import TensorSpec, arrays, parse_signature
from fwbench.catalog.models import INPUT_KINDS, ModelSpec
from fwbench.environment import cpu_features_text
from fwbench.explain.timeline import Event, Window
from fwbench.tasks import get_task


class TaskNotImplemented(Exception):
    """The adapter has no step for the case's task: recorded `unsupported`, never
    measured as another task."""


def workload_class(framework: str, case: Case) -> type[Any]:
    """The class that does a step of the case's task in `framework`: the one its registry
    entry maps the task to (`FrameworkInfo.workloads`). A task it has none for is refused,
    never measured as another task (a request read from a file is not validated again)."""
    info = get_framework(framework)
    path = info.workload_path(case.task)
    if path is None:
        raise TaskNotImplemented(
            f"task {case.task}: this adapter implements {', '.join(info.tasks)} only"
        )
    module_name, _, class_name = path.partition(":")
    cls: type[Any] = getattr(importlib.import_module(module_name), class_name)
    return cls


def synthetic_arrays(
    case: Case,
    spec: ModelSpec,
    *,
    index: str = "int64",
    channels_last: bool = False,
    batch: int | None = None,
) -> list[tuple[TensorSpec, Any]]:
    """A case's inputs as NumPy arrays, each beside the input it fills, made from its
    signature alone: a user's model's (the case's `inputs`) or its model kind's at the
    case's dims (catalog.models.INPUT_KINDS), for zoo and user models alike. The values
    are the same in every framework (catalog.inputs.arrays: one seed), so outputs can be
    compared where weights are shared. The framework says how it takes them: token ids
    in its `index` dtype, images NHWC where it computes `channels_last` (then an array's
    shape is its input's with the channels moved last); `batch`: the case's unless given
    (data parallel: the global batch)."""
    import numpy as np

    if case.inputs is not None:
        signature = parse_signature(case.inputs)
    else:
        signature = spec.input_signature(case.dims, index)
    values = arrays(signature, batch or case.batch_size)
    if channels_last and INPUT_KINDS[spec.input_kind].images:
        values = [
            np.ascontiguousarray(v.transpose(0, 2, 3, 1)) if v.ndim == 4 else v for v in values
        ]
    return list(zip(signature, values, strict=True))


class OutputShapeError(ValueError):
    """The model's output is not the logits its objective takes."""

    # Raised inside a traced step, it reaches the result as itself: TensorFlow's
    # autograph otherwise re-raises an error of its own types as a StagingError whose
    # first line reads "in user code".
    ag_pass_through = True


def check_output_shape(
    case: Case, objective: str, shape: tuple[int, ...], batch: int | None = None
) -> None:
    """Refuse logits of another shape than the model's objective takes (docs/adding-a-
    model.md): inference has no loss to fail on them and would be timed on another
    model's work, and cross-entropy takes more classes than asked for without a word.
    `batch`: the step's, where it is not the case's (a sharded step's global batch)."""
    b = case.batch_size if batch is None else batch
    expected: tuple[tuple[str, int | None], ...]
    if objective == "classify":
        expected = (("batch", b), ("num_classes", case.dims.get("num_classes")))
    elif objective == "lm":
        expected = (
            ("batch", b),
            ("seq_len", case.dims.get("seq_len")),
            ("vocab_size", case.dims.get("vocab_size")),
        )
    else:  # ctc: frames may be fewer than the input's (a strided front end)
        expected = (("batch", b), ("frames", None), ("num_classes", case.dims.get("num_classes")))
    matches = len(shape) == len(expected) and all(
        want is None or got == want for got, (_, want) in zip(shape, expected, strict=False)
    )
    if not matches:
        wanted = " x ".join(name if want is None else f"{name} {want}" for name, want in expected)
        raise OutputShapeError(
            f"model {case.model} returned output of shape {tuple(shape)}; its objective "
            f"{objective} takes logits of {wanted}"
        )


# A user's model whose `mean` objective finds nothing to average.
NO_FLOATS = "the model returned no floating-point output to average"


def check_user_logits(objective: str, batch: int, shape: tuple[int, ...]) -> None:
    """Refuse a user's model's first output that is not the logits its declared objective
    takes (classify: batch x classes; lm: batch x positions x vocabulary), the same words
    in every framework."""
    rank = 2 if objective == "classify" else 3
    if len(shape) != rank or shape[0] != batch:
        want = "batch x classes" if rank == 2 else "batch x positions x vocabulary"
        raise OutputShapeError(
            f"objective {objective} takes logits of {want}; the model's first output is {shape}"
        )


def tensors_in(out: Any) -> list[Any]:
    """The tensors a model returned, in order: a tensor, or those inside a list, tuple or
    mapping (a transformers ModelOutput is one) of them, however nested."""
    if hasattr(out, "shape") and hasattr(out, "dtype"):
        return [out]
    if isinstance(out, Mapping):
        return [t for value in out.values() for t in tensors_in(value)]
    if isinstance(out, list | tuple):
        return [t for value in out for t in tensors_in(value)]
    return []


# Values of a user's model's first output shown with its result (every element of every
# output is compared between frameworks: fwbench.models.parity.output_check).
SAMPLE_VALUES = 16


def output_sample(arrays: list[Any], again: list[Any] | None = None) -> dict[str, Any]:
    """What a result records of a user's model's outputs (NumPy arrays, in the order the
    model returns them): the first output's shape, first values and root mean square,
    each output's shape and root mean square, and, where the model ran twice on the same
    inputs (`again`), whether it computed the same thing both times: a model that does
    not (dropout left on, a random op) is `random`, and is compared by shape only."""
    import numpy as np

    def rms(flat: Any) -> float:
        return float(np.sqrt(np.mean(flat * flat))) if flat.size else 0.0

    flats = [np.asarray(a, dtype=np.float64).ravel() for a in arrays]
    sample: dict[str, Any] = {
        "shape": [int(d) for d in np.shape(arrays[0])],
        "values": [float(v) for v in flats[0][:SAMPLE_VALUES]],
        "rms": rms(flats[0]),
        "outputs": [
            {"shape": [int(d) for d in np.shape(a)], "rms": rms(f)}
            for a, f in zip(arrays, flats, strict=True)
        ],
    }
    if again is not None:
        sample["random"] = len(again) != len(arrays) or any(
            _changed(f, np.asarray(b, dtype=np.float64).ravel(), rms(f))
            for f, b in zip(flats, again, strict=False)
        )
    return sample


# Two steps on the same inputs that differ by more than this share of the output's scale
# computed other things (dropout, a random op); less is a GPU's unordered reductions.
RANDOM_SHARE = 1e-4


def _changed(first: Any, second: Any, scale: float) -> bool:
    import numpy as np

    if first.shape != second.shape:
        return True
    both_nan = np.isnan(first) & np.isnan(second)
    diff = np.where(both_nan, 0.0, np.abs(first - second))
    return bool(np.any(np.isnan(diff)) or np.any(diff > RANDOM_SHARE * max(scale, 1e-12)))


class OutputCheck:
    """check_output_shape on the first step's output, then nothing: the timed steps pay
    one attribute read. A user's model (a case with its own inputs) has no shape its
    objective fixes; when the step does not train, its outputs of the first two steps
    (the same inputs: the warmup's) are kept instead (through `as_array`, the framework's
    way to a NumPy array): every output, whole (`arrays`), for the check that every
    framework running the same model computed the same thing, and a summary (`sample`)
    that says whether the two steps agreed."""

    def __init__(
        self,
        case: Case,
        objective: str,
        as_array: Callable[[Any], Any] | None = None,
        batch: int | None = None,
    ) -> None:
        self.case, self.objective, self.pending = case, objective, True
        self.batch = batch  # the step's, where it is not the case's (check_output_shape)
        self.as_array = as_array
        self.sample: dict[str, Any] | None = None
        self.arrays: list[Any] | None = None

    def __call__(self, out: Any) -> None:
        if self.case.inputs is not None:
            self._keep(out)
            return
        shape = getattr(out, "shape", None)
        if shape is None:
            raise OutputShapeError(
                f"model {self.case.model} returned a {type(out).__name__}, not a tensor of logits"
            )
        dims = tuple(shape)
        if any(d is None for d in dims):
            # A traced shape not known until run (a graph's unknown dimension): left to
            # the step's output, where the shape is the run's.
            return
        check_output_shape(self.case, self.objective, tuple(int(d) for d in dims), self.batch)
        self.pending = False

    def _keep(self, out: Any) -> None:
        found = tensors_in(out)
        if not found:
            raise OutputShapeError(
                f"model {self.case.model} returned a {type(out).__name__}, with no tensor in it"
            )
        if self.as_array is None or get_task(self.case.task).trains:
            self.pending = False
            return
        made = [self.as_array(t) for t in found]
        if self.arrays is None:
            self.arrays = made
            self.sample = output_sample(made)
            return
        self.sample = output_sample(self.arrays, again=made)
        self.pending = False


class Workload(ABC):
    """A built model with its synthetic data already on the device, ready to step."""

    param_count: int
    # A streaming task's workload (fwbench.tasks: Task.streams) calls it once per step,
    # as soon as the step's first output is on the host (a generation's first token):
    # serving answers the query's first token then. Others never call it.
    first_output: Callable[[], None] | None = None

    @abstractmethod
    def step(self) -> None:
        """One training or inference step; may return before the device finishes."""

    @abstractmethod
    def sync(self) -> None:
        """Block until every step issued so far has finished on the device."""

    def counters(self) -> dict[str, Any]:
        """Framework counters worth recording after the measurement (e.g. traces)."""
        return {}

    def figures(self) -> dict[str, float]:
        """Its task's figures beyond the step time (fwbench.tasks.Figure), timed inside
        the steps made since the last call, as the mean over those steps, in seconds;
        {} for a task that reports its step time only. The worker reads it before and
        after each timed block, so a block's figures are its own steps'."""
        return {}

    def settings(self) -> dict[str, Any]:
        """The case's settings as applied (precision, layout, ...), recorded as built."""
        return {}

    def output_sample(self) -> dict[str, Any] | None:
        """A summary of a user's model's outputs (OutputCheck.sample), recorded with the
        result; None for the zoo's models and training."""
        check = getattr(self, "check", None)
        return check.sample if isinstance(check, OutputCheck) else None

    def output_arrays(self) -> list[Any] | None:
        """A user's model's outputs, whole, as NumPy arrays (OutputCheck.arrays): written
        for the check between frameworks, never stored; None where none were kept."""
        check = getattr(self, "check", None)
        return check.arrays if isinstance(check, OutputCheck) else None

    def compile_count(self) -> int | None:
        """(Re)compilations or traces so far; None in modes that never compile.

        Read after warmup and after the timed blocks: a difference is a recompilation
        inside the measurement, which the result flags.
        """
        return None


class LoraWorkload(ABC):
    """The task `lora` on a framework's training workload (a mixin, listed first): the
    framework's `add_lora` puts low-rank adapters into the model and freezes the rest
    before the training workload is built, so its optimizer sees the adapters alone.
    Its parameter count stays the model's (the same network in every framework, checked
    as for any task); the adapters' count is recorded as `trained_params`, which the
    run checks across frameworks (launch.records.check_outputs)."""

    def __init__(self, model: Any, case: Case, *args: Any) -> None:
        from fwbench.tasks.lora import LORA_RANK

        rank = case.task_values.get(LORA_RANK.name, LORA_RANK.default or 1)
        whole = self.count(model)
        self.lora = self.add_lora(model, rank)
        super().__init__(model, case, *args)  # type: ignore[call-arg]
        self.trained_params: int = self.param_count  # type: ignore[has-type]
        self.param_count = whole

    @abstractmethod
    def count(self, model: Any) -> int:
        """The model's trainable parameters, as the framework counts them."""

    @abstractmethod
    def add_lora(self, model: Any, rank: int) -> str:
        """Adapt `model` in place at `rank`; say what was adapted, or raise
        TaskNotImplemented naming why this model cannot be (recorded unsupported)."""

    def settings(self) -> dict[str, Any]:
        found: dict[str, Any] = super().settings()  # type: ignore[misc]
        return {**found, "lora_adapters": self.lora, "trained_params": self.trained_params}


class Adapter(ABC):
    name: ClassVar[str]

    @abstractmethod
    def configure(self, device: str, threads: int) -> dict[str, Any]:
        """Apply process-wide settings before any framework work; return them as recorded."""

    @abstractmethod
    def unavailable_reason(self, device: str) -> str | None:
        """Why `device` cannot be used here, or None when it can."""

    @abstractmethod
    def environment(self, device: str) -> dict[str, Any]:
        """Framework and library versions, and the device's name."""

    @abstractmethod
    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        """The framework-native model, with random weights."""

    @abstractmethod
    def count_params(self, model: Any) -> int:
        """Trainable parameters: the count both frameworks define the same way."""

    def model_shapes(self, build: Callable[[], Any]) -> Any | None:
        """The model `build` makes, its parameters shaped but their values not computed,
        where the framework can build it so; None where it cannot. A count needs the
        shapes alone: computing the values took most of a count (a Keras DeepSpeech2's
        orthogonal initializers 9.7 s of 9.8 s, Flax's ResNet-18 8.8 s of 9.3 s)."""
        return None

    def count_model(self, model: str, dims: Mapping[str, int]) -> int:
        """Trainable parameters of `model` at `dims`: count_params of the model, built
        without its values where the framework can (model_shapes), whole otherwise."""

        def build() -> Any:
            return self.build_model(model, dims)

        try:
            shaped = self.model_shapes(build)
        except Exception:
            # A model whose building needs values (keras-hub's tasks compile an optimizer,
            # whose step counter is a value) is built whole; so is one that fails to
            # build, which then fails with its own error.
            shaped = None
        return self.count_params(shaped if shaped is not None else build())

    @abstractmethod
    def build(self, case: Case) -> Workload:
        """Model, loss, optimizer and synthetic data on the device for `case`."""

    @abstractmethod
    def is_oom(self, exc: BaseException) -> bool:
        """Whether `exc` is this framework's out-of-memory error."""

    def is_unsupported(self, exc: BaseException) -> bool:
        """Whether `exc` says this hardware (or build) has no kernel for the case: such a
        case is recorded `unsupported` with the framework's reason, not as an error."""
        return False

    def unsupported_context(self, device: str) -> str:
        """What about this machine decides which kernels exist, appended to an
        `unsupported` result's reason so a reader sees why here and not elsewhere."""
        return f"this CPU: {cpu_features_text()}" if device == "cpu" else ""

    @abstractmethod
    def reset_device_memory(self, device: str) -> None:
        """Forget the allocator's peak so far (no-op where there is no device allocator)."""

    @abstractmethod
    def device_memory(self, device: str) -> dict[str, int] | None:
        """Allocator peaks since the last reset, in bytes; None on the CPU."""

    # What a framework may not offer: its registry entry says so (FrameworkInfo's
    # counts_flops, can_explain, can_measure_peak), and callers check that before asking,
    # so these defaults are never reached in normal use.

    def count_flops(self, workload: Workload) -> tuple[float, str]:
        """FLOPs of one step (convolutions and matrix products), and the counter used.

        May run one extra step: call it after the measurement.
        """
        raise NotImplementedError(f"{self.name} counts no FLOPs (see its registry entry)")

    def profile(
        self, workload: Workload, steps: int, trace_path: str | None
    ) -> tuple[str, list[Event], Window | tuple[float, float], str | None]:
        """Run `steps` steps under the framework's profiler.

        Returns the profiler's name, its op (CPU) or kernel (GPU) events, the window the
        steps took on the profiler's clock (a Window, with the ranges of a generation's
        phases inside it: fwbench.frameworks.generation.phases_marked; or its (start,
        end) alone), and where the raw trace was written.
        """
        raise NotImplementedError(f"{self.name} cannot be profiled (see its registry entry)")

    def compile_cache(self, directory: str, case: Case) -> dict[str, Any]:
        """Keep what the framework compiles (JIT programs, generated kernels) in
        `directory`, which every run of one command shares: later runs load what the
        first compiled instead of compiling it again. Returns the settings to record;
        a framework without such a cache, or a case that compiles nothing, records
        nothing."""
        return {}

    def compile_cache_state(self) -> dict[str, Any]:
        """After the run: how its compilations met the cache set by compile_cache (its
        hits and misses, where the framework counts them), recorded with the result: a
        first step that loaded its programs is not a cold start. {} where nothing was
        compiled, or the framework does not count."""
        return {}

    def matmul(self, device: str, dtype: str, n: int) -> Workload:
        """An n x n by n x n matrix product, for measuring the machine's peak FLOP/s."""
        raise NotImplementedError(f"{self.name} measures no peak (see its registry entry)")
