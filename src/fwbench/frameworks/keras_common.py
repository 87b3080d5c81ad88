"""What the adapters of Keras 3's non-TensorFlow backends share: synthetic data, losses
and optimizers written with keras.ops, so they produce each backend's native tensors.
The optimizer table (`make_optimizer`) and what a user's model needs (its inputs, its
loss, its outputs as arrays, its dtype policy) are the TensorFlow adapter's too: one
Keras model runs the same way on the three backends.

Imported only inside a worker, after KERAS_BACKEND is set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec, Optimizer, ctc_label_length, get_model
from fwbench.frameworks.base import (
    NO_FLOATS,
    Adapter,
    LoraWorkload,
    OutputCheck,
    OutputShapeError,
    TaskNotImplemented,
    Workload,
    check_user_logits,
    synthetic_arrays,
    tensors_in,
    workload_class,
)


def keras_module() -> Any:
    import keras

    return keras


def synthetic_inputs(case: Case, spec: ModelSpec) -> Any:
    """The case's inputs (frameworks.base.synthetic_arrays: the same values in every
    framework) as this backend's tensors: images NHWC unless the case asks for
    channels-first, token ids int32 (Keras' index dtype); one tensor, or a list in the
    model's input order (how a Keras model with several inputs takes them)."""
    ops = keras_module().ops
    found = synthetic_arrays(
        case, spec, index="int32", channels_last=case.layout != "channels_first"
    )
    made = [ops.cast(ops.convert_to_tensor(values), tensor.dtype) for tensor, values in found]
    return made[0] if len(made) == 1 else made


# keras-hub's LoRA targets: its backbones' default query and value layer names, and
# the names of the decoders whose attention uses Dense layers (SmolLM3's).
LORA_LAYERS = ("query_dense", "value_dense", "query", "value", "q_proj", "v_proj")


def enable_lora(model: Any, rank: int) -> str:
    """keras-hub's LoRA on a decoder it read (fwbench.models.keras_hub_lm.TokenIds): its
    backbone frozen, adapters on the query and value layers; what was adapted, in a line.
    fwbench.frameworks.torch_lora gives PyTorch the same adapters."""
    lm = getattr(model, "lm", None)
    if lm is None:
        raise TaskNotImplemented("task lora: LoRA adapts a decoder keras-hub read (hf:...)")
    lm.backbone.enable_lora(rank, target_layer_names=list(LORA_LAYERS))
    adapted = len(getattr(lm.backbone, "_lora_enabled_layers", []))
    if not adapted:
        raise TaskNotImplemented(
            f"task lora: keras-hub's {type(lm).__name__} has no layer named "
            f"{', '.join(LORA_LAYERS)} to adapt"
        )
    return f"rank {rank} on {adapted} query and value projections (keras-hub's enable_lora)"


class KerasLora(LoraWorkload):
    """The task `lora` on a Keras backend's training workload (listed before it)."""

    def count(self, model: Any) -> int:
        return count_trainable(model)

    def add_lora(self, model: Any, rank: int) -> str:
        return enable_lora(model, rank)


Loss = Callable[[Any, Any], Any]


def on_float32(case: Case, name: str, loss: Loss) -> Loss:
    """`loss` of logits taken in float32 (mixed precision may make them bf16 or fp16),
    refused first, once, where they are not the shape objective `name` takes
    (OutputCheck): a training step returns only its loss, so this is where its logits
    are seen. Inside a compiled step (tf.function, jax.jit) the check runs when the step
    is traced, on static shapes, and costs the timed steps nothing."""
    ops = keras_module().ops
    check = OutputCheck(case, name)

    def of_float32(y: Any, logits: Any) -> Any:
        if check.pending:
            check(logits)
        return loss(y, ops.cast(logits, "float32"))

    return of_float32


def objective(case: Case, name: str, rng: Any) -> tuple[Any, Loss]:
    """Synthetic targets and the loss of the objective, taking the model's output as it
    comes (see ModelSpec.objective; a user's model: UserLoss)."""
    keras = keras_module()
    ops = keras.ops
    if case.inputs is not None:
        return ops.zeros(()), UserLoss(name, case.batch_size)
    b = case.batch_size
    if name in ("classify", "lm"):
        high = case.dim("num_classes" if name == "classify" else "vocab_size")
        shape = (b,) if name == "classify" else (b, case.dim("seq_len"))
        y = ops.convert_to_tensor(rng.integers(0, high, shape, dtype="int32"))
        return y, on_float32(
            case, name, keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        )
    labels = ctc_label_length(case.dim("seq_len"))
    y = ops.convert_to_tensor(rng.integers(1, case.dim("num_classes"), (b, labels), dtype="int32"))

    def ctc_loss(y: Any, logits: Any) -> Any:
        frames = ops.full((logits.shape[0],), logits.shape[1], dtype="int32")
        label_lengths = ops.full((y.shape[0],), y.shape[1], dtype="int32")
        per_sample = ops.ctc_loss(y, logits, label_lengths, frames, mask_index=0)
        return ops.mean(per_sample)

    return y, on_float32(case, name, ctc_loss)


class UserLoss:
    """A user's model's loss (USER_OBJECTIVES), as PyTorch's adapter computes it: the
    mean of its floating-point outputs, or cross-entropy of its first output (logits:
    batch x classes, or batch x positions x vocabulary) against random labels, whose
    range is read from those logits the first time (a fixed seed). Written with keras.ops:
    inside a traced step (tf.function, jax.jit) the logits' shape is known when traced,
    and the labels become a constant of the step."""

    def __init__(self, name: str, batch: int) -> None:
        self.name, self.batch = name, batch
        self.labels: Any = None

    def __call__(self, _: Any, out: Any) -> Any:
        import numpy as np

        keras = keras_module()
        ops = keras.ops
        found = tensors_in(out)
        if self.name == "mean":
            floats = [
                t
                for t in found
                if keras.backend.is_float_dtype(keras.backend.standardize_dtype(t.dtype))
            ]
            if not floats:
                raise OutputShapeError(NO_FLOATS)
            return sum(ops.mean(ops.cast(t, "float32")) for t in floats)
        logits = ops.cast(found[0], "float32")
        shape = tuple(logits.shape)
        check_user_logits(self.name, self.batch, shape)
        if self.labels is None:
            rng = np.random.default_rng(0)
            self.labels = rng.integers(0, shape[-1], shape[:-1]).astype("int32")
        per_label = keras.losses.sparse_categorical_crossentropy(
            ops.convert_to_tensor(self.labels), logits, from_logits=True
        )
        return ops.mean(per_label)


def as_array(tensor: Any) -> Any:
    """A backend tensor as a float32 NumPy array (NumPy has no bfloat16): the output
    sample a user's model keeps for the check across frameworks."""
    ops = keras_module().ops
    return ops.convert_to_numpy(ops.cast(tensor, "float32"))


# The Keras dtype policy of each precision a case may ask for.
POLICIES = {"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def layer_policies(model: Any) -> dict[str, int]:
    """The dtype policies the model's layers with weights compute with (nested models'
    layers included), each with the weights it holds; none for a model without Keras
    layers (a traced graph)."""
    found: dict[str, int] = {}
    stack = list(getattr(model, "layers", ()))
    while stack:
        layer = stack.pop()
        inner = getattr(layer, "layers", None)
        if inner:
            stack.extend(inner)
        elif layer.weights:
            name = layer.dtype_policy.name
            found[name] = found.get(name, 0) + sum(math.prod(w.shape) for w in layer.weights)
    return found


def check_policy(model: Any, case: Case) -> dict[str, Any]:
    """A user's model computes with the dtype policies it was made with: a saved file's
    layers keep theirs (Keras applies the global policy only to the layers it creates),
    a traced graph the dtypes it was traced with. A case asking for another precision
    would be labelled with one it did not run: refused, saying why. The policy of most of
    its weights decides (a mixed-precision model often keeps its last layer in float32).
    The policies applied are returned for the result's settings."""
    wanted = POLICIES.get(case.precision or "", "float32")
    found = layer_policies(model)
    asked = f"--precision {case.precision or 'fp32'}"
    if not found:
        if wanted != "float32":
            raise ValueError(
                f"model {case.model} is a traced graph: it computes in the dtypes it was "
                f"traced with, so {asked} cannot apply; run fp32, or give the Keras model it "
                "came from"
            )
        return {"keras_dtype_policy": "as traced in its graph"}
    most = max(found, key=lambda name: found[name])
    if most != wanted:
        raise ValueError(
            f"model {case.model} computes with dtype policy {most}, not {wanted} ({asked}): "
            "a saved model keeps the policies it was saved with; save it under keras."
            f"mixed_precision.set_global_policy({wanted!r}), or give a function "
            "(keras:file.py:function), whose layers take the case's policy"
        )
    return {"keras_dtype_policy": ", ".join(sorted(found))}


def make_optimizer(opt: Optimizer) -> Any:
    keras = keras_module()
    if opt.name == "adam":
        return keras.optimizers.Adam(learning_rate=opt.learning_rate, epsilon=1e-7)
    if opt.name == "adamw":
        return keras.optimizers.AdamW(
            learning_rate=opt.learning_rate, epsilon=1e-7, weight_decay=opt.weight_decay
        )
    return keras.optimizers.SGD(learning_rate=opt.learning_rate, momentum=opt.momentum)


def logits_of(model: Any, ids: Any) -> Any:
    """A Keras language model's logits at every position of `ids` (1, length), float32
    NumPy: the zoo's GPT-2 twin and keras-hub's decoders both give them from a call."""
    keras = keras_module()
    if keras.backend.backend() == "torch":
        import torch

        with torch.no_grad():
            out = model(keras.ops.convert_to_tensor(ids), training=False)
    else:
        out = model(keras.ops.convert_to_tensor(ids), training=False)
    return keras.ops.convert_to_numpy(keras.ops.cast(out, "float32"))


def count_trainable(model: Any) -> int:
    return sum(math.prod(v.shape) for v in model.trainable_weights)


def unweighted(build: Callable[[], Any]) -> Any:
    """The Keras model `build` makes, its variables shaped but not initialized: Keras 3
    defers a variable made in a stateless scope from an initializer, and nothing
    initializes it here."""
    keras = keras_module()
    with keras.StatelessScope(initialize_variables=False):
        return build()


def apply_case_settings(case: Case) -> dict[str, Any]:
    """Set Keras' global image layout and dtype policy for `case` (both are read when
    layers are created, so before building), and return them as recorded."""
    keras = keras_module()
    layout = case.layout or "channels_last"
    keras.config.set_image_data_format(layout)
    policy = {"bf16": "mixed_bfloat16"}.get(case.precision or "", "float32")
    keras.mixed_precision.set_global_policy(policy)
    return {
        "layout": f"{layout} ({'NCHW' if layout == 'channels_first' else 'NHWC'})",
        "precision": case.precision or "fp32",
        "keras_dtype_policy": policy,
    }


class KerasModelsAdapter(Adapter):
    """An adapter that runs the Keras models TensorFlow's builders make (Keras 3's
    backends, and LiteRT, which converts them): its models and parameter counts are the
    Keras model's."""

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        return get_model(model).build(self.name, dims)

    def count_params(self, model: Any) -> int:
        return count_trainable(model)

    def model_shapes(self, build: Callable[[], Any]) -> Any:
        return unweighted(build)


class KerasBackendAdapter(KerasModelsAdapter):
    """What an adapter of a Keras 3 backend does the same way on every backend: build the
    Keras models under the case's layout and dtype policy, and construct the task's
    workload class (the registry entry's map) as cls(model, case, spec); its `settings_`
    receive the case's."""

    def build(self, case: Case) -> Workload:
        cls = workload_class(self.name, case)
        settings = apply_case_settings(case)
        model = self.build_model(case.reference, case.dims)
        if case.inputs is not None:  # a user's model: the policy it computes with
            settings |= check_policy(model, case)
        workload: Any = cls(model, case, case.model_spec)
        workload.settings_ = {**getattr(workload, "settings_", {}), **settings}
        built: Workload = workload
        return built
