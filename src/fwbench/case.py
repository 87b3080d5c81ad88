"""Cases: one frozen, validated benchmark configuration, and its identity.

A Case says *what* is measured. How long and how precisely it is measured lives in
`fwbench.measure.settings.TimingConfig`, so changing the precision target never changes a
case's identity (and `--resume` still recognises it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any, Literal

import psutil
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fwbench.catalog import strategies
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.catalog.inputs import parse_signature
from fwbench.catalog.models import (
    DIMENSIONS,
    INPUT_KINDS,
    TENSORS,
    USER_OBJECTIVES,
    ZOO,
    ModelSpec,
    all_dimensions,
    all_models,
    find_model,
    get_model,
    model_of,
)
from fwbench.catalog.sources import get_source, source_of
from fwbench.errors import SpecError
from fwbench.tasks import find_task, task_names
from fwbench.tasks.train import TRAIN

Device = Literal["cpu", "cuda"]
# fp32: float32 throughout (TF32 off on GPUs); tf32: float32 with TF32 tensor-core math
# (GPUs only); bf16 / fp16: mixed precision (autocast / Keras mixed policies; fp16 with
# loss scaling).
Precision = Literal["fp32", "tf32", "bf16", "fp16"]
Layout = Literal["channels_first", "channels_last"]
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
LAYOUTS: tuple[str, ...] = ("channels_first", "channels_last")

DEVICES: tuple[str, ...] = ("cpu", "cuda")
# Validation context key: accept a model, framework or task no loaded plugin registers
# (Case.recorded).
PLUGIN_MODELS = "plugin_models"
# Validation context key: a stored case, checked field by field only (Case.stored).
STORED = "stored"
MAX_BATCH_SIZE = 1 << 24
# The most intra-op threads a process is given (a case's, `peak`'s).
MAX_THREADS = 1024
# The most samples a step across its replicas may hold: the stored global batch is a
# 32-bit integer (store.columns).
MAX_GLOBAL_BATCH = (1 << 31) - 1


def default_threads() -> int:
    """Physical cores: hyper-threads rarely help dense kernels and add noise."""
    return psutil.cpu_count(logical=False) or os.cpu_count() or 1


class Case(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    framework: str
    model: str
    task: str = TRAIN.name  # a registered task (fwbench.tasks) its framework implements
    batch_size: int = Field(32, ge=1, le=MAX_BATCH_SIZE)
    # The model's dimensions (catalog.models.DIMENSIONS), name -> value, sorted by name:
    # every one its model takes (ModelSpec.dims; left out, the model's default), no other.
    # A declared dimension may also be given as a keyword of its name (input_size=224):
    # it is folded in here. A case's key lists them as fields of their own, as it did when
    # each dimension was a field, so stored keys still match.
    dims: dict[str, int] = Field(default_factory=dict)
    device: Device = "cpu"
    mode: str = "eager"
    # How the numbers are computed and laid out. None is the default: fp32, the
    # framework's native image layout (PyTorch NCHW, Keras NHWC), autotuning off; giving
    # the default explicitly normalises to None, so it names the same case.
    precision: Precision | None = None
    layout: Layout | None = None
    autotune: bool | None = None  # cudnn.benchmark / TF_CUDNN_USE_AUTOTUNE (CUDA only)
    # Intra-op and inter-op threads, set equally for every framework (METHODOLOGY rule 9).
    threads: int = Field(default_factory=default_threads, ge=1, le=MAX_THREADS)
    # Data parallelism (fwbench.distributed): a strategy and its replicas (processes for
    # ddp / multiworker, devices for dp / mirrored). None on single-device cases, so their
    # keys are unchanged. batch_size stays the per-replica batch; threads are per process.
    strategy: str | None = None
    world_size: int | None = Field(None, ge=1, le=1024)
    # The framework's own switches (its registry entry's `settings`), canonical
    # "name=value,name=value" sorted by name; None (the framework decides) keeps old keys.
    options: str | None = Field(None, max_length=1000)
    # The task's own dimensions (its registry entry's `dimensions`, e.g. a generation's
    # new tokens), canonical "name=value,name=value" sorted by name, every one the task
    # declares present (left out, its default). None for a task without any (train,
    # infer), so their keys are unchanged.
    task_dims: str | None = Field(None, max_length=1000)
    # A user's model (fwbench.catalog.sources): `model` is its name, which carries the
    # content hash of its file or config; `model_path` resolves it again in a worker (a
    # path, or module:function), and is not part of the case's identity (the same file
    # elsewhere is the same work); `inputs` its input signature (fwbench.catalog.inputs:
    # declared by the model or given, the batch written B); `objective` how it trains
    # (USER_OBJECTIVES; None: the synthetic mean). None for the zoo's models.
    model_path: str | None = Field(None, max_length=4096)
    inputs: str | None = Field(None, max_length=4000)
    objective: str | None = Field(None, max_length=40)

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any, validation: ValidationInfo) -> Any:
        if isinstance(data, dict):
            # Stored or given, a dimension may come as a field of its own name.
            data = fold_dims(data)
        if (validation.context or {}).get(STORED):
            return data  # stored as it was made: normalising could change its key
        if isinstance(data, dict):
            data = _drop_defaults(data)
            data = _distributed_defaults(data)
            if "options" in data:
                data = {**data, "options": canonical_options(data["options"])}
            data = _task_dims_defaults(data)
            if data.get("mode") is None:
                data = {k: v for k, v in data.items() if k != "mode"}
                mode = default_mode(str(data.get("framework")), data.get("strategy"))
                if mode is not None:
                    data["mode"] = mode
        if isinstance(data, dict) and isinstance(data.get("model"), str):
            # A record is data (an export from elsewhere): its model is never resolved,
            # which would import the Python it names.
            recorded = bool((validation.context or {}).get(PLUGIN_MODELS))
            data = _zoo_name(data) if recorded else _user_model(data)
            spec = find_model(data["model"])
            given = data.get("dims") or {}
            if spec is not None and isinstance(given, dict):
                dims = {**spec.dims, **given}
                data = {**data, "dims": dims}
                if spec.inputs and data.get("inputs") is None and set(dims) <= set(spec.dims):
                    # A value out of range fails here: validation names it.
                    with contextlib.suppress(KeyError, IndexError, ValueError, SpecError):
                        data["inputs"] = spec.signature(dims)
        return data

    @field_validator("dims", mode="after")
    @classmethod
    def _dims(cls, dims: dict[str, int]) -> dict[str, int]:
        # Ranges as declared, in every context (a stored batch of 0 is damage, so is a
        # stored side of 0); a dimension no loaded plugin declares keeps its value.
        for name, value in dims.items():
            if name in DIMENSIONS:
                DIMENSIONS[name].check(value)
        return dict(sorted(dims.items()))

    @model_validator(mode="after")
    def _check(self, validation: ValidationInfo) -> Case:
        if (validation.context or {}).get(STORED):
            return self
        if self.global_batch_size > MAX_GLOBAL_BATCH:
            # Refused here, not when its result is stored: a sweep would end there.
            raise ValueError(
                f"batch_size: {self.batch_size} a replica x {self.replicas} replicas is "
                f"{self.global_batch_size} samples a step, past the most ({MAX_GLOBAL_BATCH})"
            )
        recorded = bool((validation.context or {}).get(PLUGIN_MODELS))
        if recorded and (self.framework not in FRAMEWORKS or find_task(self.task) is None):
            # A recorded case of a plugin's framework or task that is not loaded here (as
            # reading a stored one does): its fields' types and ranges are checked, the
            # registries' rules need the plugin.
            return self
        if self.framework not in FRAMEWORKS:
            raise ValueError(
                f"framework: unknown framework {self.framework!r}; "
                f"valid choices: {', '.join(FRAMEWORKS)}"
            )
        info = FRAMEWORKS[self.framework]
        if self.mode not in info.modes:
            raise ValueError(
                f"mode: {info.label} has no {self.mode!r} mode; "
                f"valid choices for {self.framework}: {', '.join(info.modes)}"
            )
        if self.device not in info.devices:
            raise ValueError(
                f"device: {info.label} cannot run on {self.device!r}; "
                f"valid choices: {', '.join(info.devices)}"
            )
        if self.device != "cuda":
            why = dict(info.cuda_modes).get(self.mode)
            if why:
                raise ValueError(f"mode: {self.mode} runs on cuda only: {why}")
            if self.precision == "tf32":
                raise ValueError("precision: tf32 is a tensor-core mode of NVIDIA GPUs (cuda only)")
            if self.autotune:
                raise ValueError(
                    "autotune: cuDNN's convolution algorithm search exists on cuda only"
                )
        if find_task(self.task) is None:
            raise ValueError(
                f"task: unknown task {self.task!r}; valid choices: {', '.join(task_names())}"
            )
        does = info.does(self.task)
        if not does.available:
            raise ValueError(f"task: {info.label} cannot {self.task}: {does.reason}")
        if (self.precision or "fp32") not in info.precisions:
            raise ValueError(
                f"precision: {info.label} has no {self.precision} here; "
                f"valid choices for {self.framework}: {', '.join(info.precisions)}"
            )
        for mode, precisions, why in info.mode_exclusions:
            if self.mode == mode and (self.precision or "fp32") in precisions:
                raise ValueError(f"precision: {self.precision or 'fp32'} in mode {mode}: {why}")
        strategies.check(self.framework, self.strategy, self.world_size, self.mode, self.task)
        for name, value in self.option_values.items():
            known = {setting.name: setting for setting in info.settings}
            if name not in known:
                raise ValueError(
                    f"options: {info.label} has no setting {name!r}; valid choices for "
                    f"{self.framework}: {', '.join(known) or 'none'}"
                )
            if value not in known[name].values:
                raise ValueError(
                    f"options: {name}={value} is not a value of {name}; valid choices: "
                    f"{', '.join(known[name].values)}"
                )
            if not known[name].applies(self.task):
                raise ValueError(
                    f"options: {name} applies to task {', '.join(known[name].tasks)} only, "
                    f"not {self.task}"
                )
            if not known[name].applies(self.task, self.mode):
                raise ValueError(
                    f"options: {name} applies to mode {', '.join(known[name].modes)} only, "
                    f"not {self.mode}"
                )
        if self.strategy and (self.precision or self.layout or self.autotune):
            raise ValueError(
                "strategy: data-parallel cases run fp32 in the framework's native layout "
                "for now; leave out precision, layout and autotune"
            )
        if recorded and self.model_path:
            # A user's model in a record: its name carries its content hash, and what
            # resolves it (a file, a module) is not opened, let alone imported, here.
            zoo = find_model(self.model)
            if zoo is not None and zoo.source == ZOO:
                raise ValueError(f"model_path: {self.model} is the zoo's; nothing resolves it")
            return self
        if find_model(self.model) is None and recorded:
            # A recorded case of a plugin's (or a user's) model that is not loaded here:
            # everything but the model's own dimensions is checked.
            return self
        try:
            spec = model_of(self.model, self.model_path)
        except SpecError as exc:
            raise ValueError(f"model: {str(exc).removeprefix('model: ')}") from None
        for dim, size in self.dims.items():
            if dim not in DIMENSIONS:
                raise ValueError(
                    f"dims: no dimension {dim!r} is declared; valid choices: "
                    f"{', '.join(DIMENSIONS)}"
                )
            if dim not in spec.dims:
                raise ValueError(
                    f"{dim}: does not apply to {spec.name}, which takes "
                    f"{spec.input_kind} input; its dimensions: {', '.join(spec.dims) or 'none'}"
                )
            if size < spec.minimum(dim):
                raise ValueError(
                    f"{dim}: {size} is too small for {spec.name}; "
                    f"the smallest valid value is {spec.minimum(dim)}"
                )
        if spec.source != ZOO:
            _check_source(self, spec, info.label)
        elif self.model_path:
            raise ValueError(f"model_path: {spec.name} is the zoo's; nothing resolves it")
        if spec.input_kind == TENSORS:
            _check_inputs(self, spec)
        else:
            if self.inputs or self.objective:
                given = "inputs" if self.inputs else "objective"
                raise ValueError(
                    f"{given}: applies to a model that takes tensors of its own; {spec.name} "
                    f"takes {spec.input_kind} input sized by its dimensions, and trains with "
                    "its own loss"
                )
            spec.builder(self.framework)
        task = find_task(self.task)
        if task is not None and task.takes is not None and not task.takes(spec):
            able = [m.name for m in all_models().values() if task.takes(m)]
            raise ValueError(
                f"model: task {self.task} does not take {spec.name}; "
                f"valid choices: {', '.join(able) or 'none installed'}"
            )
        if task is not None and task.fits is not None and (why := task.fits(self, spec)):
            raise ValueError(f"task: {self.task} cannot run {spec.name}: {why}")
        seq_len = self.dims.get("seq_len")
        if spec.context is not None and (seq_len or 0) > spec.context:
            # Its position table holds `context` positions: a longer sequence would be
            # another model (the builders grew the table, and the parameters with it).
            raise ValueError(
                f"seq_len: {seq_len} is past {spec.name}'s context of {spec.context} "
                f"positions; valid: 1 to {spec.context}"
            )
        if spec.context is not None and seq_len is None and self.prompt_len > spec.context:
            # A user's decoder (hf:) given its tokens by --input-shape: past its position
            # table, its worker would fail indexing it.
            raise ValueError(
                f"input_shape: {self.prompt_len} tokens are past {spec.name}'s context of "
                f"{spec.context} positions; valid: 1 to {spec.context}"
            )
        alike = spec.alike_within.get(info.models_from or self.framework)
        if alike is not None and self.positions > alike[0]:
            raise ValueError(
                f"model: {info.label} computes {spec.name} as {spec.family} does up to "
                f"{alike[0]} positions only ({alike[1]}); this case fills {self.positions}; "
                f"valid: a sequence (and new tokens) of {alike[0]} positions at most"
            )
        if self.layout is not None and not INPUT_KINDS[spec.input_kind].images:
            raise ValueError(
                f"layout: applies to image models; {spec.name} takes {spec.input_kind} input"
            )
        if self.layout is not None and self.layout not in info.layouts:
            raise ValueError(
                f"layout: {info.label} runs {', '.join(info.layouts)} only; "
                f"valid choices for {self.framework}: {', '.join(info.layouts)}"
            )
        if spec.inputs and self.inputs != spec.signature(self.dims):
            raise ValueError(
                f"inputs: {spec.name}'s inputs are made from its dimensions "
                f"({spec.signature(self.dims)}); give its dimensions instead"
            )
        return self

    @classmethod
    def build(cls, **fields: Any) -> Case:
        """Validate `fields` into a Case, or raise a one-line SpecError."""
        try:
            return cls(**fields)
        except ValidationError as exc:
            raise SpecError(validation_message(exc)) from None

    @classmethod
    def recorded(cls, fields: dict[str, Any]) -> Case:
        """The case of a record read from elsewhere (an export being imported), validated as
        Case.build validates one, except that a model no loaded plugin registers is taken
        (its dimensions unchecked): the caller can warn with `find_model`. Strict: JSON
        has its types, and `true` or "8" in a batch size is damage, not a batch of 1 or 8.
        Raises ValidationError."""
        given = {f: fields[f] for f in cls.model_fields if f in fields}
        given |= {d: fields[d] for d in _OLD_DIMENSIONS if fields.get(d) is not None}
        return cls.model_validate(given, strict=True, context={PLUGIN_MODELS: True})

    @classmethod
    def record_keys(cls) -> frozenset[str]:
        """The keys of a record that are its case's (`recorded` reads them): its fields,
        and the dimensions records held as fields of their own before `dims`."""
        return frozenset({*cls.model_fields, *_OLD_DIMENSIONS})

    @classmethod
    def stored(cls, fields: dict[str, Any]) -> Case:
        """A case as a results file stored it. Its fields' types and ranges are checked
        (a value no case can have, a batch of 0, would break the reports that read it),
        not the registries: it stays readable when its framework's or model's plugin is
        not loaded (cases are validated where they are made, in Case.build). Fields it
        did not have take their defaults. Raises ValidationError."""
        given = {f: fields[f] for f in cls.model_fields if f in fields}
        if isinstance(given.get("dims"), str):
            given["dims"] = json.loads(given["dims"])  # the results table's JSON text
        if given.get("dims") is None:
            # Written before dims was one mapping: each dimension a column of its own.
            given.pop("dims", None)
            given |= {d: fields[d] for d in _OLD_DIMENSIONS if fields.get(d) is not None}
        return cls.model_validate(given, context={STORED: True})

    def __hash__(self) -> int:
        return hash(self.key())

    def key(self) -> str:
        """Stable identity of the case: the same fields give the same key on any machine.

        Fields that are None (dimensions the model does not take) are left out, so adding
        a new optional field never changes the key of a case recorded before it. Where a
        user's model lies is not its identity (its name carries its content hash).
        """
        canonical = json.dumps(self.flat(exclude={"model_path"}), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def flat(self, exclude: set[str] | None = None) -> dict[str, Any]:
        """Its fields that are set, each dimension as a field of its own, as a case was
        before its dimensions were one mapping: what its key (and a serving point's) hash,
        so they stay the same (a stored result is found again by --resume and compared
        with new ones)."""
        fields = self.model_dump(exclude_none=True, exclude={"dims", *(exclude or set())})
        return fields | self.dims

    def dim(self, name: str) -> int:
        """A dimension's value; 0 for one its model does not take."""
        return self.dims.get(name, 0)

    @property
    def shape(self) -> str:
        """The dimensions in short, the model's then the task's: `224px c1000`,
        `seq128 v30522 c2`, `seq200 f161 c29`, `seq128 v50257 new32`."""
        parts = []
        spec = find_model(self.model)
        # A model whose inputs are made from its dimensions is said by its dimensions.
        if self.inputs is not None and not (spec is not None and spec.inputs):
            # A user's model: each input's shape past the batch (`x=3x224x224`).
            for tensor in parse_signature(self.inputs):
                dims = "x".join(str(d) for d in tensor.shape[1:]) or "scalar"
                kind = "" if tensor.dtype == "float32" else f":{tensor.dtype}"
                parts.append(f"{tensor.name}={dims}{kind}")
        # In the order they were declared (the built-in ones first), as they always read.
        order = [d for d in DIMENSIONS if d in self.dims]
        order += sorted(set(self.dims) - set(DIMENSIONS))
        task = find_task(self.task)
        declared = {**DIMENSIONS, **{d.name: d for d in (task.dimensions if task else ())}}
        values = [(name, self.dims[name]) for name in order] + list(self.task_values.items())
        for name, value in values:
            found = declared.get(name)
            parts.append(found.label(value) if found else f"{name}{value}")
        return " ".join(parts)

    @property
    def task_values(self) -> dict[str, int]:
        """The task's own dimensions: name -> value (empty for a task without any)."""
        if not self.task_dims:
            return {}
        return {n: int(v) for n, v in (p.split("=", 1) for p in self.task_dims.split(","))}

    @property
    def replicas(self) -> int:
        return self.world_size or 1

    @property
    def global_batch_size(self) -> int:
        """Samples per step across all replicas (batch_size is per replica)."""
        return self.batch_size * self.replicas

    @property
    def units_per_step(self) -> int:
        """What a step makes, in its task's unit (fwbench.tasks: Task.unit): the global
        batch, times the task's own count per sample where it has one (a generation's
        new tokens)."""
        task = find_task(self.task)
        per_sample = self.task_values.get(task.units_from, 1) if task and task.units_from else 1
        return self.global_batch_size * per_sample

    @property
    def reference(self) -> str:
        """What resolves its model: a user's model's path (or module:function), else its
        name."""
        return self.model_path or self.model

    @property
    def model_spec(self) -> ModelSpec:
        """Its model (a user's resolved again from its reference, and checked to be the
        same file: catalog.models.model_of)."""
        return model_of(self.model, self.model_path)

    @property
    def loss(self) -> str:
        """The objective it trains with: the one given (a user's model), else its model's."""
        return self.objective or self.model_spec.objective

    @property
    def positions(self) -> int:
        """The positions a step fills: a token model's sequence, and what its task adds
        after it (a generation's new tokens)."""
        task = find_task(self.task)
        added = self.task_values.get(task.positions_from, 0) if task and task.positions_from else 0
        return self.prompt_len + added

    @property
    def prompt_len(self) -> int:
        """A token model's sequence length: its dimension, or its first input's second
        dimension (a user's model: input_ids of B x sequence)."""
        if "seq_len" in self.dims or not self.inputs:
            return self.dim("seq_len")
        first = parse_signature(self.inputs)[0]
        return (
            int(first.shape[1]) if len(first.shape) > 1 and isinstance(first.shape[1], int) else 0
        )

    @property
    def implementation(self) -> str:
        spec = find_model(self.model)
        return spec.implementation if spec else ""

    def workload_key(self) -> tuple[Any, ...]:
        """Everything but how it is run (framework, mode, implementation): cases with one
        key do the same work."""
        spec = find_model(self.model)
        return (
            spec.workload if spec else self.model,
            self.task,
            self.batch_size,
            self.shape,
            self.precision or "fp32",
            self.device,
            self.threads,
            self.replicas,
        )

    @property
    def variant(self) -> str:
        """How the workload is run: framework/mode, then any non-default implementation,
        layout, autotuning, data-parallel strategy and options
        (`torch/compile/channels_last`, `tensorflow/graph/onednn=off`)."""
        parts = [self.framework, self.mode, self.implementation]
        parts += [self.layout or "", "autotune" if self.autotune else "", self.strategy or ""]
        parts += [self.options or ""]
        return "/".join(p for p in parts if p)

    @property
    def option_values(self) -> dict[str, str]:
        """The options the case sets: name -> value (empty when the framework decides)."""
        return option_values_of(self.options)

    def setting_value(self, name: str) -> str | None:
        """The value the case runs its framework's setting `name` at: the one it sets, else
        the setting's fixed default (Setting.default; None where the framework decides)."""
        given = self.option_values.get(name)
        if given is not None:
            return given
        known = {s.name: s for s in FRAMEWORKS[self.framework].settings}
        return known[name].default

    def option_env(self) -> dict[str, str]:
        """Environment variables its options set in the worker, before the framework loads."""
        info = FRAMEWORKS.get(self.framework)
        if info is None:
            return {}
        found = {}
        for setting in info.settings:
            value = self.option_values.get(setting.name)
            if value is not None and setting.env:
                found[setting.env] = setting.env_value(value)
        return found

    @property
    def runs_eagerly(self) -> bool:
        """Whether its mode runs the model op by op (the registry's `eager_modes`)."""
        info = FRAMEWORKS.get(self.framework)
        return info is not None and self.mode in info.eager_modes

    @property
    def numerics(self) -> str:
        """What it computes in: its precision, or what its mode makes of it (a runtime's
        quantised weights: the registry's `mode_numerics`)."""
        info = FRAMEWORKS.get(self.framework)
        changed = dict(info.mode_numerics).get(self.mode or "") if info is not None else None
        return changed or self.precision or "fp32"

    def label(self) -> str:
        precision = f" {self.precision}" if self.precision else ""
        workers = f" x{self.world_size}" if self.strategy else ""
        return (
            f"{self.variant} {self.model} {self.task} b{self.batch_size}{workers} "
            f"{self.shape}{precision} {self.device} t{self.threads}"
        )


# The dimensions that were fields of their own before dims (results schema 18 and
# earlier): a stored row's columns, an old export's keys.
_OLD_DIMENSIONS = ("input_size", "seq_len", "vocab_size", "freq_bins", "num_classes")


def fold_dims(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with every declared dimension given as a key of its own name (input_size=224,
    as the CLI's flags, a sweep's axes and old records give them) moved into `dims`; a
    None among them is left out (the model's default). A dimension given both ways with
    two values is refused."""
    declared = all_dimensions()  # a plugin's among them (loading the plugins)
    names = [k for k in data if k in declared or k in _OLD_DIMENSIONS]
    if not names:
        return data
    out = {k: v for k, v in data.items() if k not in names}
    dims = out.get("dims")
    if dims is None:
        dims = {}
    if not isinstance(dims, dict):
        return data  # validation refuses the mapping
    dims = dict(dims)
    for name in names:
        value = data[name]
        if value is None:
            continue
        if name in dims and dims[name] != value:
            raise ValueError(f"{name}: given twice ({dims[name]!r}, {value!r})")
        dims[name] = value
    out["dims"] = dims
    return out


def _zoo_name(data: dict[str, Any]) -> dict[str, Any]:
    text = data["model"]
    return {**data, "model": text.lower()} if text.lower() in all_models() else data


def _user_model(data: dict[str, Any]) -> dict[str, Any]:
    """The model as a case holds it: a zoo name lower-cased; a user's model (a file, a
    library architecture) by its name, with what resolves it again (`model_path`).
    Resolving hashes the file; a model that cannot be resolved is left for validation."""
    text = data["model"]
    if text.lower() in all_models():
        return {**data, "model": text.lower()}
    if data.get("model_path") or source_of(text) is None:
        return data  # already resolved (a stored or copied case), or unknown: validation says
    try:
        spec = get_model(text)
    except SpecError:
        return data  # validation says why, in the model's words
    reference = spec.reference or None
    return {**data, "model": spec.name, "model_path": reference}


def _check_source(case: Case, spec: Any, label: str) -> None:
    """What a user's model's source allows, checked before any work (its entry's data)."""
    source = get_source(spec.source)
    if source.runs:
        ok, why = source.can(case.framework, spec)
        if not ok:
            raise ValueError(f"model: {label} cannot run {spec.name}: {why}")
    refused = dict(source.refuses).get(case.task)
    if refused:
        raise ValueError(f"task: {spec.name} cannot {case.task}: {refused}")
    for framework, modes, why in source.mode_limits:
        if framework == case.framework and case.mode in modes:
            raise ValueError(f"mode: {label} cannot run {spec.name} in mode {case.mode}: {why}")


def _check_inputs(case: Case, spec: Any) -> None:
    """A model that takes tensors of its own: its signature is given, and nothing sizes
    it otherwise."""
    if case.inputs is None:
        raise ValueError(
            f"inputs: {spec.name} needs its input signature (fwbench reads it from the "
            "model, or --input-shape gives it)"
        )
    parse_signature(case.inputs)
    if case.objective is not None and case.objective not in USER_OBJECTIVES:
        raise ValueError(
            f"objective: {case.objective!r}; valid choices: {', '.join(USER_OBJECTIVES)}"
        )
    for dim in case.dims:
        if dim not in spec.dims:
            raise ValueError(
                f"{dim}: does not apply to {spec.name}, whose inputs are its own "
                f"({case.inputs}); give shapes with --input-shape"
            )
    if case.layout is not None:
        raise ValueError(f"layout: {spec.name} takes its inputs as they are ({case.inputs})")


def default_mode(framework: str, strategy: Any = None) -> str | None:
    """The mode a case runs in when none is given: the framework's documented fast path
    (its registry entry's `default_mode`: PyTorch eager, TensorFlow tf.function, Keras on
    JAX jit, the runtimes' optimised levels), or the first mode a data-parallel strategy
    takes where that one is not among them. The mode is always part of a case's key, so
    a stored case keeps its key whichever default made it. None for an unknown framework
    (validation names the valid choices)."""
    info = FRAMEWORKS.get(framework)
    if info is None:
        return None
    found = strategies.get_strategy(strategy.lower()) if isinstance(strategy, str) else None
    if found is not None and found.framework == framework and info.default_mode not in found.modes:
        return found.modes[0]
    # A plugin entry that names no default_mode and has no eager mode: its first mode.
    return info.default_mode if info.default_mode in info.modes else info.modes[0]


def execution_note(a: Case, b: Case) -> str:
    """What a verdict between `a` and `b` must say when one runs op by op and the other a
    compiled graph, or one computes in other numerics than the other (a runtime's int8
    weights against fp32: METHODOLOGY rule 12, like with like, or say so); "" otherwise.
    The tables explain it once, under them (fwbench.report.summary.verdict_notes)."""
    note = " [eager vs compiled]" if a.runs_eagerly != b.runs_eagerly else ""
    if a.numerics != b.numerics:
        note += f" [{a.numerics} vs {b.numerics}]"
    return note


def canonical_options(value: Any) -> Any:
    """`--options` as given ("onednn=off", "b=1, a=2", "", "default", a mapping) in its
    canonical form: "name=value" pairs sorted by name, or None for none. Anything else is
    left for validation to refuse."""
    if isinstance(value, dict):
        value = ",".join(f"{k}={v}" for k, v in value.items())
    pairs = _pairs(value, "options", "onednn=off")
    if not isinstance(pairs, dict):
        return pairs
    return ",".join(f"{k}={v}" for k, v in sorted(pairs.items()))


def option_values_of(value: Any) -> dict[str, str]:
    """`--options` in any form canonical_options takes, as name -> value: empty for none,
    and for a value that is not options (validation refuses it). Raises ValueError for a
    pair that is not NAME=VALUE, as canonical_options does."""
    given = canonical_options(value)
    if not isinstance(given, str) or not given:
        return {}
    return dict(part.split("=", 1) for part in given.split(","))


def parse_dims(values: Sequence[str]) -> dict[str, int]:
    """`--dim NAME=VALUE` (repeated, or "a=1,b=2") as a mapping; a SpecError for a text
    that is not NAME=WHOLE-NUMBER. Names are checked where the case is validated."""
    found: dict[str, int] = {}
    for text in values:
        try:
            pairs = _pairs(text, "dim", "input_size=224") or {}
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        for name, value in pairs.items():
            if not value.lstrip("-").isdigit():
                raise SpecError(f"dim: {name}={value!r} is not a whole number")
            if name in found and found[name] != int(value):
                raise SpecError(f"dim: {name} given twice ({found[name]}, {value})")
            found[name] = int(value)
    return found


def canonical_task_dims(value: Any) -> Any:
    """`--task-dims` as given ("new_tokens=32", "a=1, b=2", a mapping, "" or None for none)
    as a mapping name -> value, or None for none. Values are checked against the task's
    declaration (`_task_dims_defaults`); anything else is left for validation."""
    if isinstance(value, dict):
        return value
    return _pairs(value, "task_dims", "new_tokens=32")


def _pairs(value: Any, field: str, example: str) -> Any:
    """ "a=1, b=2" as {"a": "1", "b": "2"} (names lower-cased); None for "", "default" or
    "none"; a value that is not text as it is (validation refuses it)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.lower() in ("", "default", "none"):
        return None
    pairs: dict[str, str] = {}
    for part in text.split(","):
        name, sep, setting = (p.strip().lower() for p in part.partition("="))
        if not sep or not name or not setting:
            raise ValueError(f"{field}: {part.strip()!r} is not NAME=VALUE (e.g. {example})")
        if name in pairs and pairs[name] != setting:
            raise ValueError(f"{field}: {name} given twice ({pairs[name]}, {setting})")
        pairs[name] = setting
    return pairs


def _task_dims_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """The task's dimensions in canonical form, each one left out at its default, each one
    given checked against its declaration; None for a task that declares none."""
    given = canonical_task_dims(data.get("task_dims"))
    task = find_task(str(data.get("task", TRAIN.name)))
    if task is None or not isinstance(given, dict | None):
        return data  # validation names the unknown task or the bad value
    values = {d.name: d.default for d in task.dimensions}
    # Task.dimension refuses a name the task does not declare, naming those it does.
    values |= {name: task.dimension(name).check(v) for name, v in (given or {}).items()}
    if not values:
        return {**data, "task_dims": None} if "task_dims" in data else data
    return {**data, "task_dims": ",".join(f"{k}={v}" for k, v in sorted(values.items()))}


def _drop_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """Explicit defaults name the same case as omitted ones (None): fp32, the framework's
    native layout, autotuning off."""
    out = dict(data)
    if out.get("precision") == "fp32":
        out["precision"] = None
    if out.get("autotune") is False:
        out["autotune"] = None
    info = FRAMEWORKS.get(str(out.get("framework")))
    if info is not None and out.get("layout") == info.native_layout:
        out["layout"] = None
    return out


def _distributed_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """A strategy defaults to one replica; one replica without a strategy is a plain case
    (the same key as before the field existed); replicas that are processes share the
    machine's cores unless threads are given."""
    strategy, world = data.get("strategy"), data.get("world_size")
    if isinstance(strategy, str):
        strategy = strategy.lower()
        data = {**data, "strategy": strategy}
    if strategy is None and world == 1:
        data = {**data, "world_size": None}
    if strategy is not None and world is None:
        data = {**data, "world_size": 1}
        world = 1
    found = strategies.get_strategy(strategy) if isinstance(strategy, str) else None
    if data.get("threads") is None:
        data = {k: v for k, v in data.items() if k != "threads"}
        if found is not None and isinstance(world, int) and world >= 1:
            data["threads"] = max(1, default_threads() // found.process_count(world))
    return data


def validation_message(exc: ValidationError) -> str:
    """Turn pydantic's multi-line report into one line naming the key and the problem."""
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"])
    if loc.startswith("dims."):
        loc = loc.removeprefix("dims.")  # a dimension is named as itself
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "literal_error":
        expected = err.get("ctx", {}).get("expected", "")
        return f"{loc}: invalid value {err.get('input')!r}; valid choices: {expected}"
    if err["type"] == "extra_forbidden":
        return f"unknown key {loc!r}"
    if err["type"] == "missing":
        return f"{loc}: missing"
    if loc == "dims" and msg.split(":", 1)[0] in DIMENSIONS:
        return msg  # names the dimension itself: "seq_len: 0 is out of range (...)"
    if loc and not msg.startswith(f"{loc}:"):
        return f"{loc}: {msg} (got {err.get('input')!r})"
    return msg
