"""torchvision's ResNets (v1.5: the stride on the 3x3 convolution of a bottleneck) in
Flax NNX, channels last as JAX's convolutions run fastest: the same layers, shapes and
trainable parameters as torch_zoo's and keras_resnet's, BatchNorm with PyTorch's
momentum (0.1, Flax's 0.9) and epsilon (1e-5). Imported in a Flax worker only."""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx

# Blocks per stage, and whether each is a bottleneck (1x1, 3x3, 1x1, four times wider).
DEPTHS: dict[int, tuple[tuple[int, ...], bool]] = {
    18: ((2, 2, 2, 2), False),
    50: ((3, 4, 6, 3), True),
    152: ((3, 8, 36, 3), True),
}


def _conv(cin: int, cout: int, kernel: int, stride: int, rngs: nnx.Rngs) -> nnx.Conv:
    pad = kernel // 2
    return nnx.Conv(
        cin, cout, (kernel, kernel), strides=(stride, stride),
        padding=((pad, pad), (pad, pad)), use_bias=False, rngs=rngs,
    )  # fmt: skip


def _norm(features: int, rngs: nnx.Rngs) -> nnx.BatchNorm:
    return nnx.BatchNorm(features, momentum=0.9, epsilon=1e-5, rngs=rngs)


class Block(nnx.Module):
    def __init__(self, cin: int, width: int, stride: int, bottleneck: bool, rngs: nnx.Rngs) -> None:
        out = width * 4 if bottleneck else width
        if bottleneck:
            self.convs = nnx.List(
                [
                    _conv(cin, width, 1, 1, rngs),
                    _conv(width, width, 3, stride, rngs),
                    _conv(width, out, 1, 1, rngs),
                ]
            )
            self.norms = nnx.List([_norm(width, rngs), _norm(width, rngs), _norm(out, rngs)])
        else:
            self.convs = nnx.List(
                [_conv(cin, width, 3, stride, rngs), _conv(width, out, 3, 1, rngs)]
            )
            self.norms = nnx.List([_norm(width, rngs), _norm(out, rngs)])
        # Assigned once: an attribute first set to None is static to NNX, not a layer.
        reshape = stride != 1 or cin != out
        self.down = (
            nnx.Sequential(_conv(cin, out, 1, stride, rngs), _norm(out, rngs)) if reshape else None
        )

    def __call__(self, x: Any) -> Any:
        skip = x if self.down is None else self.down(x)
        last = len(self.convs) - 1
        for i, (conv, norm) in enumerate(zip(self.convs, self.norms, strict=True)):
            x = norm(conv(x))
            if i < last:
                x = jax.nn.relu(x)
        return jax.nn.relu(x + skip)


class ResNet(nnx.Module):
    def __init__(self, depth: int, num_classes: int, rngs: nnx.Rngs) -> None:
        stages, bottleneck = DEPTHS[depth]
        self.stem = _conv(3, 64, 7, 2, rngs)
        self.stem_norm = _norm(64, rngs)
        blocks = []
        cin = 64
        for stage, count in enumerate(stages):
            width = 64 * 2**stage
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                blocks.append(Block(cin, width, stride, bottleneck, rngs))
                cin = width * 4 if bottleneck else width
        self.blocks = nnx.List(blocks)
        self.fc = nnx.Linear(cin, num_classes, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = jax.nn.relu(self.stem_norm(self.stem(x)))
        x = nnx.max_pool(x, (3, 3), strides=(2, 2), padding=((1, 1), (1, 1)))  # type: ignore[no-untyped-call]
        for block in self.blocks:
            x = block(x)
        return self.fc(x.mean(axis=(1, 2)))


def resnet(depth: int, num_classes: int, seed: int = 0) -> ResNet:
    return ResNet(depth, num_classes, nnx.Rngs(seed))
