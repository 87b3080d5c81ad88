"""ResNet-18 in Keras, layer for layer the same as torchvision.models.resnet18.

keras.applications has no ResNet-18. This follows torchvision: 3x3 convolutions without
bias, BatchNorm (eps 1e-5, as torch), a 1x1 strided projection when the shape changes,
global average pooling and one dense layer, so parameter counts match exactly.
"""

from __future__ import annotations

from typing import Any

import keras
from keras import layers

_BN = {"epsilon": 1e-5, "momentum": 0.9}


def _basic_block(x: Any, filters: int, stride: int, name: str) -> Any:
    shortcut = x
    y = layers.ZeroPadding2D(1, name=f"{name}_pad1")(x)
    y = layers.Conv2D(filters, 3, strides=stride, use_bias=False, name=f"{name}_conv1")(y)
    y = layers.BatchNormalization(**_BN, name=f"{name}_bn1")(y)
    y = layers.ReLU(name=f"{name}_relu1")(y)
    y = layers.ZeroPadding2D(1, name=f"{name}_pad2")(y)
    y = layers.Conv2D(filters, 3, use_bias=False, name=f"{name}_conv2")(y)
    y = layers.BatchNormalization(**_BN, name=f"{name}_bn2")(y)
    if stride != 1 or x.shape[-1] != filters:
        shortcut = layers.Conv2D(
            filters, 1, strides=stride, use_bias=False, name=f"{name}_down_conv"
        )(x)
        shortcut = layers.BatchNormalization(**_BN, name=f"{name}_down_bn")(shortcut)
    y = layers.Add(name=f"{name}_add")([y, shortcut])
    return layers.ReLU(name=f"{name}_out")(y)


def resnet18(num_classes: int = 1000, input_size: int = 224) -> keras.Model:
    inputs = keras.Input(shape=(input_size, input_size, 3), name="image")
    x = layers.ZeroPadding2D(3, name="stem_pad")(inputs)
    x = layers.Conv2D(64, 7, strides=2, use_bias=False, name="stem_conv")(x)
    x = layers.BatchNormalization(**_BN, name="stem_bn")(x)
    x = layers.ReLU(name="stem_relu")(x)
    x = layers.ZeroPadding2D(1, name="pool_pad")(x)
    x = layers.MaxPooling2D(3, strides=2, name="stem_pool")(x)
    for stage, filters in enumerate((64, 128, 256, 512), start=1):
        stride = 1 if stage == 1 else 2
        x = _basic_block(x, filters, stride, name=f"layer{stage}_0")
        x = _basic_block(x, filters, 1, name=f"layer{stage}_1")
    x = layers.GlobalAveragePooling2D(name="avgpool")(x)
    outputs = layers.Dense(num_classes, name="fc")(x)
    return keras.Model(inputs, outputs, name="resnet18")
