"""LiteRT (TensorFlow Lite): the case's Keras model converted by TensorFlow's converter
and run by LiteRT's interpreter, TensorFlow's own deployment path. Inference only, CPU.

The model is the one a `tensorflow` case of the same shape builds (the zoo's Keras 3
builder, NHWC), converted as TensorFlow's documentation recommends for Keras 3:
`model.export(folder, format="tf_saved_model")`, then
`tf.lite.TFLiteConverter.from_saved_model(folder).convert()` with the converter's default
op set (LiteRT's builtin ops). Keras' own `format="litert"` export would also allow
TensorFlow ops (TF Select): a model needing one converts, and then LiteRT's interpreter
refuses to load it without the Flex delegate, which the `ai-edge-litert` package does not
ship. With builtins only, an op LiteRT lacks stops the conversion with the converter's
reason, and the case is recorded `unsupported` with it.

Modes are the converter's numerics: `fp32` (no optimisation), `int8` (dynamic-range
quantisation, `Optimize.DEFAULT`: weights stored in int8, activations quantised on the
fly inside the convolutions and matrix products) and `fp16` (weights stored in fp16,
`supported_types=[tf.float16]`). The last two compute otherwise than the fp32 frameworks:
their outputs are checked against TensorFlow's within a looser tolerance, which is
recorded, and a verdict against an fp32 framework says so (the registry entry's
`mode_numerics`).

A user's model runs the same way: a Keras model (a `.keras` file, a `keras:` function)
is exported and converted as the zoo's are; a TensorFlow SavedModel is converted as it is
(`from_saved_model` on its folder, its serving signature), its batch dimension, which the
signature leaves open, sized by `resize_tensor_input` before the tensors are allocated.
Its inputs are the same values as every other framework's, and its first output is kept
for the check across frameworks.

The interpreter is created once, with the case's threads and LiteRT's default XNNPACK
delegate (`OpResolverType.AUTO`; `--options xnnpack=off` runs LiteRT's builtin kernels
alone), and reused for every step. A step does what a deployed application does with it:
`set_tensor` for each input, `invoke`, `get_tensor` for the output (a copy). The export,
the conversion, the interpreter's creation (XNNPACK packs the weights then) and its first
`invoke` are timed apart and recorded; the first `invoke` is the output check's.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import ai_edge_litert
import keras
import numpy as np
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from fwbench.case import Case
from fwbench.catalog.inputs import parse_signature
from fwbench.frameworks.agreement import within
from fwbench.frameworks.base import OutputCheck, Workload, tensors_in, workload_class
from fwbench.frameworks.keras_common import (
    KerasModelsAdapter,
    check_policy,
    count_trainable,
    synthetic_inputs,
)
from fwbench.frameworks.tf_flops import dense_flops
from fwbench.models.sources.saved_model import FOLDER as SAVED_MODEL
from fwbench.models.sources.saved_model import signature_key

# Outputs must agree with TensorFlow's within this share of the largest output. fp32:
# kernels reorder sums. fp16 weights round each weight to 11 significant bits (a relative
# step of 2^-11); int8 weights to one of 255 steps per channel or tensor, and the dynamic
# quantisation of the activations adds as much again. Measured on the zoo at 64 px with
# random weights: fp16 up to 1.5e-3 (EfficientNet-B4), int8 up to 4.4e-2 (EfficientNet-B4)
# and 5.6e-2 (BERT-base); a model converted wrongly is off by far more.
TOLERANCE = {"fp32": 1e-3, "fp16": 1e-2, "int8": 1e-1}

# How each mode converts, as recorded in the settings.
QUANTISATION = {
    "fp32": "none: fp32 weights and activations",
    "int8": "dynamic range: int8 weights, activations quantised at run time "
    "(optimizations=[Optimize.DEFAULT])",
    "fp16": "fp16 weights (optimizations=[Optimize.DEFAULT], supported_types=[float16])",
}
CONVERTER = (
    'keras.Model.export(format="tf_saved_model"), '
    "tf.lite.TFLiteConverter.from_saved_model, builtin ops"
)
# A user's SavedModel: converted as it is.
SAVED_CONVERTER = "tf.lite.TFLiteConverter.from_saved_model (its serving signature), builtin ops"
RESOLVERS = {
    "on": OpResolverType.AUTO,  # LiteRT's default: the XNNPACK delegate on
    "off": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
}
_OP_NAMES = {code: name for name, code in vars(schema.BuiltinOperator).items() if name.isupper()}


class ConversionError(RuntimeError):
    """TensorFlow's converter cannot convert the model (an op LiteRT has no builtin
    for): a property of the model, recorded `unsupported` with the converter's reason."""


def converter_reason(exc: BaseException) -> str:
    """The converter's failure in one line: the ops it names and its own first line."""
    errors = list(getattr(exc, "errors", None) or [])
    ops = list(dict.fromkeys(e.operator.name for e in errors if e.operator.name))
    said = next((e.error_message for e in errors if e.error_message), "") or str(exc)
    first = next((ln.strip() for ln in said.splitlines() if ln.strip()), type(exc).__name__)
    if ops:
        return f"TensorFlow's converter has no LiteRT builtin op for {', '.join(ops)}: {first}"
    return f"TensorFlow's converter failed: {first}"


def convert(
    model: keras.Model, specs: list[tf.TensorSpec], mode: str, saved: Path | None = None
) -> tuple[bytes, float]:
    """The model as a LiteRT flatbuffer, and the SavedModel export's share of the time.
    A SavedModel of the user's (`saved`, its folder) is converted as it is."""
    with tempfile.TemporaryDirectory(prefix="fwbench-litert-") as folder:
        start = time.perf_counter()
        if saved is None:
            # A model of several inputs takes them as one list.
            signature = [specs[0]] if len(specs) == 1 else [specs]
            model.export(folder, format="tf_saved_model", verbose=False, input_signature=signature)
        export_s = time.perf_counter() - start
        converter = (
            tf.lite.TFLiteConverter.from_saved_model(folder)
            if saved is None
            else tf.lite.TFLiteConverter.from_saved_model(
                str(saved), signature_keys=[signature_key(saved)]
            )
        )
        if mode in ("int8", "fp16"):
            converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if mode == "fp16":
            converter.target_spec.supported_types = [tf.float16]
        try:
            flat: bytes = converter.convert()
        except Exception as exc:
            raise ConversionError(converter_reason(exc)) from exc
    return flat, export_s


def file_ops(flat: bytes) -> list[str]:
    """The type of every operator of the converted model's main graph, as the file holds
    them (before any delegate)."""
    model = schema.Model.GetRootAs(flat, 0)
    graph = model.Subgraphs(0)
    ops = []
    for i in range(graph.OperatorsLength()):
        code = model.OperatorCodes(graph.Operators(i).OpcodeIndex())
        # The schema keeps a code in one of two fields; the larger is the real one.
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin == schema.BuiltinOperator.CUSTOM:
            ops.append((code.CustomCode() or b"CUSTOM").decode())
        else:
            ops.append(_OP_NAMES.get(builtin, str(builtin)))
    return ops


def delegated(nodes: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(operators a delegate runs, operators of the model, delegate partitions), from the
    interpreter's nodes: the model's operators, then one DELEGATE node per partition that
    took some of them. A partition's operators are those its outputs are computed by,
    back to its inputs."""
    producer = {
        int(t): n["index"] for n in nodes if n["op_name"] != "DELEGATE" for t in n["outputs"]
    }
    partitions = [n for n in nodes if n["op_name"] == "DELEGATE"]
    taken: set[int] = set()
    for part in partitions:
        given = {int(t) for t in part["inputs"]}
        pending = [int(t) for t in part["outputs"]]
        while pending:
            node = producer.get(pending.pop())
            if node is None or node in taken:
                continue
            taken.add(node)
            pending += [i for t in nodes[node]["inputs"] if (i := int(t)) >= 0 and i not in given]
    return len(taken), len(nodes) - len(partitions), len(partitions)


def delegation(interpreter: Interpreter, xnnpack: str) -> str:
    """What XNNPACK took of the model, for the settings."""
    if xnnpack == "off":
        return "none: LiteRT's builtin kernels (xnnpack=off)"
    try:
        # The interpreter's Python API has no public reader of its execution plan.
        taken, total, partitions = delegated(interpreter._get_ops_details())
    except Exception as exc:
        return f"not read: {type(exc).__name__}: {exc}"
    return f"{taken} of {total} operators in {partitions} partition(s)"


class LiteRtWorkload(Workload):
    """One interpreter, reused: inputs set, invoked, the output read back, per step."""

    def __init__(
        self,
        interpreter: Interpreter,
        feeds: list[tuple[int, np.ndarray]],
        outputs: list[int],
        model: keras.Model,
        inputs: Any,
    ) -> None:
        self.interpreter = interpreter
        self.feeds = feeds
        # A step reads back the first output (by name); the check across frameworks,
        # every one (`outputs`, in the order of their names).
        self.output, self.outputs = outputs[0], outputs
        self.model = model  # the source, for its FLOPs
        self.inputs = inputs
        self.param_count = count_trainable(model)
        self.last: np.ndarray | None = None
        self.settings_: dict[str, Any] = {}
        self.check: OutputCheck | None = None  # made after the first step (build)

    def step(self) -> None:
        for index, value in self.feeds:
            self.interpreter.set_tensor(index, value)
        self.interpreter.invoke()
        self.last = self.interpreter.get_tensor(self.output)

    def sync(self) -> None:
        pass  # invoke returns when the outputs are written, and get_tensor copied them

    def every_output(self) -> list[np.ndarray]:
        """A step's outputs, all of them (copies)."""
        self.step()
        return [self.interpreter.get_tensor(i) for i in self.outputs]

    def settings(self) -> dict[str, Any]:
        return self.settings_


def tensor_indices(interpreter: Interpreter, names: list[str]) -> tuple[list[int], list[int]]:
    """The tensor indices of the inputs named in the model's signature, in that order,
    and of its outputs, in the order of their names. The signature runner that reads them holds the
    interpreter's internals, which `invoke` refuses while anything does: it lives in
    this function only."""
    runner = interpreter.get_signature_runner()
    given = runner.get_input_details()
    outputs = runner.get_output_details()
    return [int(given[n]["index"]) for n in names], [
        int(outputs[name]["index"]) for name in sorted(outputs)
    ]


def _arrays(inputs: Any) -> list[np.ndarray]:
    given = inputs if isinstance(inputs, list) else [inputs]
    return [np.asarray(t.numpy()) for t in given]


def agreement(got: np.ndarray, want: np.ndarray, mode: str) -> dict[str, Any]:
    """LiteRT's output against TensorFlow's on the same batch, within the mode's tolerance."""
    return within(got, want, TOLERANCE[mode], "TensorFlow", f"mode {mode}", "the converted model")


class LiteRtAdapter(KerasModelsAdapter):
    # Its parameter count is the source Keras model's: nothing converted is counted.
    name = "litert"

    def __init__(self) -> None:
        self.threads = 1

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        self.threads = threads
        # TensorFlow builds, converts and runs the reference outputs with the same threads.
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
        return {"num_threads": threads}

    def unavailable_reason(self, device: str) -> str | None:
        return None  # CPU only, and the registry entry offers no other device

    def environment(self, device: str) -> dict[str, Any]:
        return {
            "ai_edge_litert": ai_edge_litert.__version__,
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
        }

    def build(self, case: Case) -> Workload:
        # The task's workload class (the registry entry's map: inference only),
        # constructed as cls(interpreter, feeds, outputs, model, inputs).
        cls = workload_class(self.name, case)
        spec = case.model_spec
        mode = case.mode or "fp32"
        xnnpack = str(case.setting_value("xnnpack"))
        # Global Keras state, read when layers are created: the converted model is NHWC fp32.
        keras.config.set_image_data_format("channels_last")
        keras.mixed_precision.set_global_policy("float32")
        model = self.build_model(case.reference, case.dims)
        # A user's model computes in the dtypes it was made with: fp32 here.
        policy = check_policy(model, case) if case.inputs is not None else {}
        inputs = synthetic_inputs(case, spec)
        arrays = _arrays(inputs)
        # A user's SavedModel is converted as it is (its source's builder of that format
        # gives the folder), its inputs named by its signature; any other model is the
        # Keras model, exported with inputs fwbench names.
        saved = spec.build(SAVED_MODEL, {}) if SAVED_MODEL in spec.builders else None
        names = (
            [t.name for t in parse_signature(case.inputs or "")]
            if saved is not None
            else [f"input_{i}" for i in range(len(arrays))]
        )
        specs = [
            tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=n)
            for a, n in zip(arrays, names, strict=True)
        ]
        start = time.perf_counter()
        flat, export_s = convert(model, specs, mode, saved)
        convert_s = time.perf_counter() - start - export_s
        start = time.perf_counter()
        interpreter = Interpreter(
            model_content=flat,
            num_threads=self.threads,
            experimental_op_resolver_type=RESOLVERS[xnnpack],
        )
        inputs_at, outputs = tensor_indices(interpreter, names)
        for index, value in zip(inputs_at, arrays, strict=True):
            # A SavedModel's signature leaves its batch open: sized to the case's.
            interpreter.resize_tensor_input(index, value.shape)
        interpreter.allocate_tensors()
        interpreter_s = time.perf_counter() - start
        feeds = list(zip(inputs_at, arrays, strict=True))
        workload = cls(interpreter, feeds, outputs, model, inputs)
        start = time.perf_counter()
        workload.step()
        first_invoke_s = time.perf_counter() - start
        assert workload.last is not None
        # The zoo's output shape checked; a user's model's outputs of two steps kept for
        # the check across frameworks.
        workload.check = OutputCheck(case, spec.objective, np.asarray)
        if case.inputs is None:
            workload.check(workload.last)
        while workload.check.pending:
            workload.check(workload.every_output())
        want = np.asarray(tensors_in(model(inputs, training=False))[0], dtype=np.float32)
        checked = agreement(np.asarray(workload.last, dtype=np.float32), want, mode)
        ops = file_ops(flat)
        workload.settings_ = {
            "precision": "fp32",
            "layout": "channels_last (NHWC)",
            "converter": CONVERTER if saved is None else SAVED_CONVERTER,
            "quantization": QUANTISATION[mode],
            **({"export_s": export_s} if saved is None else {}),
            "convert_s": convert_s,
            "interpreter_s": interpreter_s,
            "first_invoke_s": first_invoke_s,
            "model_bytes": len(flat),
            "model_ops": len(ops),
            "model_op_types": ", ".join(f"{op} {n}" for op, n in Counter(ops).most_common(5)),
            "delegate": "XNNPACK (LiteRT's default)" if xnnpack == "on" else "none",
            "delegated_ops": delegation(interpreter, xnnpack),
            "source_params": workload.param_count,
            **policy,
            **checked,
        }
        built: Workload = workload
        return built

    def count_flops(self, workload: Workload) -> tuple[float, str]:
        assert isinstance(workload, LiteRtWorkload)
        model = workload.model
        traced = tf.function(lambda x: model(x, training=False))
        flops, unsized = dense_flops(traced.get_concrete_function(workload.inputs).graph)
        if unsized:
            raise ValueError(f"cannot size {', '.join(unsized)} ops to count their FLOPs")
        method = "fwbench graph counter on the source Keras model (convolutions and matmuls)"
        return float(flops), method

    def is_oom(self, exc: BaseException) -> bool:
        return isinstance(exc, MemoryError) or "bad_alloc" in str(exc)

    def is_unsupported(self, exc: BaseException) -> bool:
        return isinstance(exc, ConversionError)

    def reset_device_memory(self, device: str) -> None:
        pass

    def device_memory(self, device: str) -> dict[str, int] | None:
        return None

    def unsupported_context(self, device: str) -> str:
        return ""  # what the converter lacks is a property of the model, not of this CPU
