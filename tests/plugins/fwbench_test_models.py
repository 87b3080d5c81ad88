"""Models that misbehave on purpose, loaded through FWBENCH_PLUGINS by the tests.

`crash` kills its worker with a segmentation fault, as a broken native extension would;
`hang` never finishes building, as a deadlocked one would (`hangs_in_torch` in PyTorch
alone).
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

from fwbench.catalog.models import ModelSpec, register


def _image_model(
    name: str, builders: dict[str, Any], description: str, size: int = 32, smallest: int = 1
) -> None:
    """Register a test-only image model under `name`."""
    register(
        ModelSpec(
            name=name,
            family="test",
            input_kind="image",
            default_input_size=size,
            min_input_size=smallest,
            builders=builders,
            description=description,
        )
    )


def _segfault(num_classes: int, input_size: int) -> Any:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    raise AssertionError("unreachable")


def _hang(num_classes: int, input_size: int) -> Any:
    time.sleep(3600)
    raise AssertionError("unreachable")


for _name, _builder in (("crash", _segfault), ("hang", _hang)):
    _image_model(
        _name, {"torch": _builder, "tensorflow": _builder}, "misbehaves on purpose (tests only)"
    )


def _torch_tiny(num_classes: int, input_size: int) -> Any:
    from torch import nn

    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, num_classes),
    )


def _keras_tiny(num_classes: int, input_size: int) -> Any:
    import keras

    from fwbench.models.keras_resnet import image_shape

    axis = 1 if keras.config.image_data_format() == "channels_first" else -1
    return keras.Sequential(
        [
            keras.Input(image_shape(input_size)),
            keras.layers.Conv2D(8, 3, padding="same", use_bias=True),
            keras.layers.BatchNormalization(axis=axis),
            keras.layers.ReLU(),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(num_classes),
        ]
    )


# A model small enough that compiling it (torch.compile, XLA) takes seconds, not minutes.
_image_model(
    "tiny_cnn",
    {"torch": _torch_tiny, "tensorflow": _keras_tiny},
    "one convolution (tests only)",
    size=16,
    smallest=4,
)


# Hangs building in PyTorch alone: a variant that hangs beside one that works.
_image_model(
    "hangs_in_torch",
    {"torch": _hang, "tensorflow": _keras_tiny},
    "hangs in PyTorch, one convolution in TensorFlow (tests only)",
    size=16,
    smallest=4,
)


def _torch_wrong_shape(num_classes: int, input_size: int) -> Any:
    from torch import nn

    return nn.Sequential(nn.Flatten(), nn.Linear(3 * input_size * input_size, num_classes + 1))


def _keras_wrong_shape(num_classes: int, input_size: int) -> Any:
    import keras

    from fwbench.models.keras_resnet import image_shape

    return keras.Sequential(
        [
            keras.Input(image_shape(input_size)),
            keras.layers.Flatten(),
            keras.layers.Dense(num_classes + 1),
        ]
    )


def _flax_wrong_shape(num_classes: int, input_size: int) -> Any:
    from flax import nnx

    class WrongShape(nnx.Module):
        def __init__(self) -> None:
            self.dense = nnx.Linear(3 * input_size * input_size, num_classes + 1, rngs=nnx.Rngs(0))

        def __call__(self, x: Any) -> Any:
            return self.dense(x.reshape(x.shape[0], -1))

    return WrongShape()


# Logits of one class too many: only a check of the output's shape notices (inference has
# no loss, and cross-entropy takes the extra class).
_image_model(
    "wrong_shape",
    {"torch": _torch_wrong_shape, "tensorflow": _keras_wrong_shape, "flax": _flax_wrong_shape},
    "returns one class too many (tests only)",
    size=4,
    smallest=1,
)


def _keras_unconvertible(num_classes: int, input_size: int) -> Any:
    import keras
    import tensorflow as tf

    from fwbench.models.keras_resnet import image_shape

    class BesselI0e(keras.layers.Layer):
        """An op TensorFlow has and LiteRT has no builtin for."""

        def call(self, x: Any) -> Any:
            return tf.math.bessel_i0e(x)

    return keras.Sequential(
        [
            keras.Input(image_shape(input_size)),
            keras.layers.Conv2D(4, 3, padding="same"),
            BesselI0e(),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(num_classes),
        ]
    )


# TensorFlow runs it; TensorFlow's converter cannot make a LiteRT model of it.
_image_model(
    "bessel_cnn",
    {"tensorflow": _keras_unconvertible},
    "a convolution, then an op LiteRT lacks (tests only)",
    size=8,
    smallest=1,
)
