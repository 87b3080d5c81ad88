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


def _segfault(num_classes: int, input_size: int) -> Any:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    raise AssertionError("unreachable")


def _hang(num_classes: int, input_size: int) -> Any:
    time.sleep(3600)
    raise AssertionError("unreachable")


for _name, _builder in (("crash", _segfault), ("hang", _hang)):
    register(
        ModelSpec(
            name=_name,
            family="test",
            input_kind="image",
            default_input_size=32,
            min_input_size=1,
            builders={"torch": _builder, "tensorflow": _builder},
            description="misbehaves on purpose (tests only)",
        )
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
register(
    ModelSpec(
        name="tiny_cnn",
        family="test",
        input_kind="image",
        default_input_size=16,
        min_input_size=4,
        builders={"torch": _torch_tiny, "tensorflow": _keras_tiny},
        description="one convolution (tests only)",
    )
)


# Hangs building in PyTorch alone: a variant that hangs beside one that works.
register(
    ModelSpec(
        name="hangs_in_torch",
        family="test",
        input_kind="image",
        default_input_size=16,
        min_input_size=4,
        builders={"torch": _hang, "tensorflow": _keras_tiny},
        description="hangs in PyTorch, one convolution in TensorFlow (tests only)",
    )
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


# Logits of one class too many: only a check of the output's shape notices (inference has
# no loss, and cross-entropy takes the extra class).
register(
    ModelSpec(
        name="wrong_shape",
        family="test",
        input_kind="image",
        default_input_size=4,
        min_input_size=1,
        builders={"torch": _torch_wrong_shape, "tensorflow": _keras_wrong_shape},
        description="returns one class too many (tests only)",
    )
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
register(
    ModelSpec(
        name="bessel_cnn",
        family="test",
        input_kind="image",
        default_input_size=8,
        min_input_size=1,
        builders={"tensorflow": _keras_unconvertible},
        description="a convolution, then an op LiteRT lacks (tests only)",
    )
)
