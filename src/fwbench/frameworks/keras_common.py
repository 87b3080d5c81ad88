"""What the adapters of Keras 3's non-TensorFlow backends share: synthetic data, losses
and optimizers written with keras.ops, so they produce each backend's native tensors.
The optimizer table (`make_optimizer`) is the TensorFlow adapter's too.

Imported only inside a worker, after KERAS_BACKEND is set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from fwbench.case import Case
from fwbench.catalog.models import Optimizer, ctc_label_length, get_model
from fwbench.frameworks.base import Adapter, Workload, workload_class


def keras_module() -> Any:
    import keras

    return keras


def synthetic_inputs(case: Case, kind: str, rng: Any) -> Any:
    ops = keras_module().ops
    b = case.batch_size
    if kind == "image":
        side = int(case.input_size or 0)
        shape: tuple[int, ...] = (b, side, side, 3)
        if case.layout == "channels_first":
            shape = (b, 3, side, side)
        return ops.convert_to_tensor(rng.standard_normal(shape, dtype="float32"))
    if kind == "spectrogram":
        frames = (b, int(case.seq_len or 0), int(case.freq_bins or 0))
        return ops.convert_to_tensor(rng.standard_normal(frames, dtype="float32"))
    tokens = (b, int(case.seq_len or 0))
    vocab = int(case.vocab_size or 0)
    ids = [ops.convert_to_tensor(rng.integers(0, vocab, tokens, dtype="int32")) for _ in range(2)]
    return ids if kind == "token_pair" else ids[0]


Loss = Callable[[Any, Any], Any]


def objective(case: Case, name: str, rng: Any) -> tuple[Any, Loss]:
    keras = keras_module()
    ops = keras.ops
    b = case.batch_size
    if name in ("classify", "lm"):
        high = int((case.num_classes if name == "classify" else case.vocab_size) or 0)
        shape = (b,) if name == "classify" else (b, int(case.seq_len or 0))
        y = ops.convert_to_tensor(rng.integers(0, high, shape, dtype="int32"))
        return y, keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    labels = ctc_label_length(int(case.seq_len or 0))
    y = ops.convert_to_tensor(
        rng.integers(1, int(case.num_classes or 0), (b, labels), dtype="int32")
    )

    def ctc_loss(y: Any, logits: Any) -> Any:
        frames = ops.full((logits.shape[0],), logits.shape[1], dtype="int32")
        label_lengths = ops.full((y.shape[0],), y.shape[1], dtype="int32")
        per_sample = ops.ctc_loss(y, logits, label_lengths, frames, mask_index=0)
        return ops.mean(per_sample)

    return y, ctc_loss


def make_optimizer(opt: Optimizer) -> Any:
    keras = keras_module()
    if opt.name == "adam":
        return keras.optimizers.Adam(learning_rate=opt.learning_rate, epsilon=1e-7)
    if opt.name == "adamw":
        return keras.optimizers.AdamW(
            learning_rate=opt.learning_rate, epsilon=1e-7, weight_decay=opt.weight_decay
        )
    return keras.optimizers.SGD(learning_rate=opt.learning_rate, momentum=opt.momentum)


def count_trainable(model: Any) -> int:
    return sum(math.prod(v.shape) for v in model.trainable_weights)


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


class KerasBackendAdapter(Adapter):
    """What an adapter of a Keras 3 backend does the same way on every backend: build the
    Keras models (TensorFlow's builders) under the case's layout and dtype policy, and
    construct the task's workload class (the registry entry's map) as
    cls(model, case, spec); its `settings_` receive the case's."""

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        return get_model(model).build(self.name, dims)

    def count_params(self, model: Any) -> int:
        return count_trainable(model)

    def build(self, case: Case) -> Workload:
        cls = workload_class(self.name, case)
        settings = apply_case_settings(case)
        model = self.build_model(case.reference, case.dims)
        workload = cls(model, case, case.model_spec)
        workload.settings_ = {**getattr(workload, "settings_", {}), **settings}
        built: Workload = workload
        return built
