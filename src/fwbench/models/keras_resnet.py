"""ResNets in Keras, layer for layer the same as torchvision.models.resnet*.

keras.applications has no ResNet-18, and its ResNet-50/152 are ResNet v1: the stride
sits in the first 1x1 convolution of a block and every convolution has a bias, which
makes them ~5% cheaper in FLOPs than torchvision's (v1.5: stride in the 3x3). Comparing
the two would time different work, so fwbench builds torchvision's architecture here:
bias-free convolutions, BatchNorm with torch's epsilon, a strided 1x1 projection when
the shape changes, global average pooling and one dense layer. Parameter counts and
FLOPs match torchvision exactly.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

_BN = {"epsilon": 1e-5, "momentum": 0.9}  # torch: eps 1e-5, momentum 0.1 (other convention)


def _channel_axis() -> int:
    """Follows keras.config.image_data_format(), which a case's layout sets."""
    return 1 if keras.config.image_data_format() == "channels_first" else -1


def image_shape(side: int) -> tuple[int, int, int]:
    return (3, side, side) if _channel_axis() == 1 else (side, side, 3)


def _conv(x: Any, filters: int, kernel: int, stride: int, name: str) -> Any:
    if kernel > 1:
        x = layers.ZeroPadding2D(kernel // 2, name=f"{name}_pad")(x)
    return layers.Conv2D(filters, kernel, strides=stride, use_bias=False, name=name)(x)


def _conv_bn(x: Any, filters: int, kernel: int, stride: int, name: str, relu: bool) -> Any:
    x = _conv(x, filters, kernel, stride, name=f"{name}_conv")
    x = layers.BatchNormalization(axis=_channel_axis(), **_BN, name=f"{name}_bn")(x)
    return layers.ReLU(name=f"{name}_relu")(x) if relu else x


def _shortcut(x: Any, filters: int, stride: int, name: str) -> Any:
    if stride == 1 and x.shape[_channel_axis()] == filters:
        return x
    return _conv_bn(x, filters, 1, stride, name=f"{name}_down", relu=False)


def _basic(x: Any, width: int, stride: int, name: str) -> Any:
    y = _conv_bn(x, width, 3, stride, name=f"{name}_1", relu=True)
    y = _conv_bn(y, width, 3, 1, name=f"{name}_2", relu=False)
    y = layers.Add(name=f"{name}_add")([y, _shortcut(x, width, stride, name)])
    return layers.ReLU(name=f"{name}_out")(y)


def _bottleneck(x: Any, width: int, stride: int, name: str) -> Any:
    y = _conv_bn(x, width, 1, 1, name=f"{name}_1", relu=True)
    y = _conv_bn(y, width, 3, stride, name=f"{name}_2", relu=True)  # v1.5: stride here
    y = _conv_bn(y, width * 4, 1, 1, name=f"{name}_3", relu=False)
    y = layers.Add(name=f"{name}_add")([y, _shortcut(x, width * 4, stride, name)])
    return layers.ReLU(name=f"{name}_out")(y)


_DEPTHS = {
    18: (_basic, (2, 2, 2, 2)),
    34: (_basic, (3, 4, 6, 3)),
    50: (_bottleneck, (3, 4, 6, 3)),
    101: (_bottleneck, (3, 4, 23, 3)),
    152: (_bottleneck, (3, 8, 36, 3)),
}


def resnet(depth: int, num_classes: int = 1000, input_size: int = 224) -> keras.Model:
    block, counts = _DEPTHS[depth]
    inputs = keras.Input(shape=image_shape(input_size), name="image")
    x = _conv_bn(inputs, 64, 7, 2, name="stem", relu=True)
    x = layers.ZeroPadding2D(1, name="pool_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="stem_pool")(x)
    for stage, (width, n) in enumerate(zip((64, 128, 256, 512), counts, strict=True), 1):
        for i in range(n):
            stride = 2 if stage > 1 and i == 0 else 1
            x = block(x, width, stride, name=f"layer{stage}_{i}")
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    outputs = layers.Dense(num_classes, name="fc")(x)
    return keras.Model(inputs, outputs, name=f"resnet{depth}")
