"""torchvision's VGG-16, MobileNetV2 (width 1.0) and EfficientNet-B4 in Flax NNX, channels
last: the same layers, shapes and trainable parameters as torchvision's (138,357,544,
3,504,872 and 19,341,616 at 1000 classes), their dropout and stochastic depth where
torchvision has them (active in training only),
BatchNorm with PyTorch's momentum and epsilon (flax_resnet.py). Imported in a Flax worker
only."""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from fwbench.models.flax_resnet import _norm

# VGG-16's convolutions (configuration "D"): output channels, "M" a 2x2 max pool.
VGG16: tuple[int | str, ...] = (
    64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M",
)  # fmt: skip

# MobileNetV2's inverted residual stages: expansion, output channels, blocks, first stride.
MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))  # fmt: skip


def adaptive_avg_pool(x: Any, out: int) -> Any:
    """PyTorch's AdaptiveAvgPool2d((out, out)) over NHWC: bin i of a side n spans
    [floor(i n / out), ceil((i + 1) n / out)), so bins overlap where n is not a multiple."""
    _, h, w, _ = x.shape
    if h == out and w == out:
        return x

    def pool(x: Any, axis: int, n: int) -> Any:
        if n % out == 0:
            shape = (*x.shape[:axis], out, n // out, *x.shape[axis + 1 :])
            return x.reshape(shape).mean(axis=axis + 1)
        bins = [
            jax.lax.slice_in_dim(x, (i * n) // out, -(-((i + 1) * n) // out), axis=axis)
            for i in range(out)
        ]
        return jnp.stack([b.mean(axis=axis) for b in bins], axis=axis)

    return pool(pool(x, 1, h), 2, w)


class VGG(nnx.Module):
    def __init__(self, num_classes: int, rngs: nnx.Rngs) -> None:
        convs: list[nnx.Conv | None] = []
        cin = 3
        for item in VGG16:
            if item == "M":
                convs.append(None)
                continue
            assert isinstance(item, int)
            convs.append(nnx.Conv(cin, item, (3, 3), padding=((1, 1), (1, 1)), rngs=rngs))
            cin = item
        # The pools' places, static; the convolutions, the layers.
        self.pools = tuple(i for i, c in enumerate(convs) if c is None)
        self.convs = nnx.List([c for c in convs if c is not None])
        self.fc1 = nnx.Linear(512 * 7 * 7, 4096, rngs=rngs)
        self.fc2 = nnx.Linear(4096, 4096, rngs=rngs)
        self.fc3 = nnx.Linear(4096, num_classes, rngs=rngs)
        self.drop1 = nnx.Dropout(0.5, rngs=rngs)
        self.drop2 = nnx.Dropout(0.5, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        convs = iter(self.convs)
        for i in range(len(VGG16)):
            if i in self.pools:
                x = nnx.max_pool(x, (2, 2), strides=(2, 2))  # type: ignore[no-untyped-call]
            else:
                x = jax.nn.relu(next(convs)(x))
        x = adaptive_avg_pool(x, 7)
        # Flattened as torchvision does (channels first), so fc1's rows mean the same.
        x = x.transpose(0, 3, 1, 2).reshape(x.shape[0], -1)
        x = self.drop1(jax.nn.relu(self.fc1(x)))
        x = self.drop2(jax.nn.relu(self.fc2(x)))
        return self.fc3(x)


def _conv_norm(
    cin: int, cout: int, kernel: int, stride: int, groups: int, rngs: nnx.Rngs
) -> nnx.Sequential:
    pad = (kernel - 1) // 2
    conv = nnx.Conv(
        cin, cout, (kernel, kernel), strides=(stride, stride), padding=((pad, pad), (pad, pad)),
        feature_group_count=groups, use_bias=False, rngs=rngs,
    )  # fmt: skip
    return nnx.Sequential(conv, _norm(cout, rngs))


class InvertedResidual(nnx.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int, rngs: nnx.Rngs) -> None:
        hidden = cin * expand
        layers = [_conv_norm(cin, hidden, 1, 1, 1, rngs)] if expand != 1 else []
        layers.append(_conv_norm(hidden, hidden, 3, stride, hidden, rngs))  # depthwise
        self.activated = nnx.List(layers)  # each followed by ReLU6
        self.project = _conv_norm(hidden, cout, 1, 1, 1, rngs)  # linear bottleneck
        self.residual = stride == 1 and cin == cout

    def __call__(self, x: Any) -> Any:
        y = x
        for layer in self.activated:
            y = jax.nn.relu6(layer(y))
        y = self.project(y)
        return x + y if self.residual else y


class MobileNetV2(nnx.Module):
    def __init__(self, num_classes: int, rngs: nnx.Rngs) -> None:
        self.stem = _conv_norm(3, 32, 3, 2, 1, rngs)
        blocks = []
        cin = 32
        for expand, cout, count, stride in MOBILENET_V2:
            for i in range(count):
                blocks.append(InvertedResidual(cin, cout, stride if i == 0 else 1, expand, rngs))
                cin = cout
        self.blocks = nnx.List(blocks)
        self.head = _conv_norm(cin, 1280, 1, 1, 1, rngs)
        self.drop = nnx.Dropout(0.2, rngs=rngs)
        self.fc = nnx.Linear(1280, num_classes, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = jax.nn.relu6(self.stem(x))
        for block in self.blocks:
            x = block(x)
        x = jax.nn.relu6(self.head(x))
        return self.fc(self.drop(x.mean(axis=(1, 2))))


# EfficientNet-B0's stages (expansion, kernel, stride, input and output channels, blocks),
# scaled for B4 as torchvision scales them: widths x1.4 (to multiples of 8), depths x1.8.
EFFICIENTNET_B0 = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
                   (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
                   (6, 3, 1, 192, 320, 1))  # fmt: skip
B4_WIDTH, B4_DEPTH, B4_DROPOUT, STOCHASTIC_DEPTH = 1.4, 1.8, 0.4, 0.2


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's _make_divisible: the nearest multiple, never 10% below the value."""
    found = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return found + divisor if found < 0.9 * value else found


class SqueezeExcitation(nnx.Module):
    def __init__(self, channels: int, squeeze: int, rngs: nnx.Rngs) -> None:
        self.fc1 = nnx.Conv(channels, squeeze, (1, 1), rngs=rngs)
        self.fc2 = nnx.Conv(squeeze, channels, (1, 1), rngs=rngs)

    def __call__(self, x: Any) -> Any:
        scale = x.mean(axis=(1, 2), keepdims=True)
        return x * jax.nn.sigmoid(self.fc2(jax.nn.silu(self.fc1(scale))))


class MBConv(nnx.Module):
    def __init__(
        self, cin: int, cout: int, expand: int, kernel: int, stride: int, drop: float,
        rngs: nnx.Rngs,
    ) -> None:  # fmt: skip
        hidden = _divisible(cin * expand)
        layers = [_conv_norm(cin, hidden, 1, 1, 1, rngs)] if hidden != cin else []
        layers.append(_conv_norm(hidden, hidden, kernel, stride, hidden, rngs))  # depthwise
        self.activated = nnx.List(layers)  # each followed by SiLU
        self.excite = SqueezeExcitation(hidden, max(1, cin // 4), rngs)
        self.project = _conv_norm(hidden, cout, 1, 1, 1, rngs)
        self.residual = stride == 1 and cin == cout
        # Stochastic depth, torchvision's "row" mode: a sample's whole branch dropped,
        # the kept ones scaled by 1 / (1 - p); training only.
        self.drop = (
            nnx.Dropout(drop, broadcast_dims=(1, 2, 3), rngs=rngs) if self.residual else None
        )

    def __call__(self, x: Any) -> Any:
        y = x
        for layer in self.activated:
            y = jax.nn.silu(layer(y))
        y = self.project(self.excite(y))
        if self.drop is None:
            return y
        return x + self.drop(y)


class EfficientNet(nnx.Module):
    def __init__(self, num_classes: int, rngs: nnx.Rngs) -> None:
        stages = [
            (e, k, s, _divisible(cin * B4_WIDTH), _divisible(cout * B4_WIDTH),
             math.ceil(n * B4_DEPTH))
            for e, k, s, cin, cout, n in EFFICIENTNET_B0
        ]  # fmt: skip
        total = sum(stage[-1] for stage in stages)
        self.stem = _conv_norm(3, stages[0][3], 3, 2, 1, rngs)
        blocks: list[MBConv] = []
        for expand, kernel, stride, cin, cout, count in stages:
            for i in range(count):
                drop = STOCHASTIC_DEPTH * len(blocks) / total
                first = i == 0
                blocks.append(
                    MBConv(cin if first else cout, cout, expand, kernel, stride if first else 1,
                           drop, rngs)
                )  # fmt: skip
        self.blocks = nnx.List(blocks)
        last = stages[-1][4]
        self.head = _conv_norm(last, 4 * last, 1, 1, 1, rngs)
        self.dropout = nnx.Dropout(B4_DROPOUT, rngs=rngs)
        self.fc = nnx.Linear(4 * last, num_classes, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = jax.nn.silu(self.stem(x))
        for block in self.blocks:
            x = block(x)
        x = jax.nn.silu(self.head(x))
        return self.fc(self.dropout(x.mean(axis=(1, 2))))


def vgg16(num_classes: int, seed: int = 0) -> VGG:
    return VGG(num_classes, nnx.Rngs(seed))


def mobilenet_v2(num_classes: int, seed: int = 0) -> MobileNetV2:
    return MobileNetV2(num_classes, nnx.Rngs(seed))


def efficientnet_b4(num_classes: int, seed: int = 0) -> EfficientNet:
    return EfficientNet(num_classes, nnx.Rngs(seed))
