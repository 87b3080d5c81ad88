"""torchvision's Inception-v3 without its auxiliary head, in Flax NNX, channels last: the
same layers, shapes and trainable parameters (23,834,568 at 1000 classes). Its
convolutions have no bias and are followed by BatchNorm with torchvision's epsilon of
0.001 (PyTorch's momentum, as flax_resnet.py); its average pools count the padding, as
PyTorch's do by default. Imported in a Flax worker only."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

Size = int | tuple[int, int]


def _pair(value: Size) -> tuple[int, int]:
    return (value, value) if isinstance(value, int) else value


class BasicConv(nnx.Module):
    """torchvision's BasicConv2d: a convolution without bias, BatchNorm, ReLU."""

    def __init__(
        self, cin: int, cout: int, kernel: Size, rngs: nnx.Rngs, stride: int = 1, pad: Size = 0
    ) -> None:
        ph, pw = _pair(pad)
        self.conv = nnx.Conv(
            cin, cout, _pair(kernel), strides=(stride, stride),
            padding=((ph, ph), (pw, pw)), use_bias=False, rngs=rngs,
        )  # fmt: skip
        self.norm = nnx.BatchNorm(cout, momentum=0.9, epsilon=1e-3, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        return jax.nn.relu(self.norm(self.conv(x)))


def _avg_pool(x: Any) -> Any:
    # PyTorch's F.avg_pool2d(x, 3, stride=1, padding=1): the zero padding counts.
    return nnx.avg_pool(x, (3, 3), (1, 1), padding=((1, 1), (1, 1)), count_include_pad=True)  # type: ignore[no-untyped-call]


def _max_pool(x: Any) -> Any:
    return nnx.max_pool(x, (3, 3), (2, 2), padding="VALID")  # type: ignore[no-untyped-call]


def _chain(convs: Iterable[BasicConv], x: Any) -> Any:
    for conv in convs:
        x = conv(x)
    return x


class InceptionA(nnx.Module):
    def __init__(self, cin: int, pool_features: int, rngs: nnx.Rngs) -> None:
        self.b1 = BasicConv(cin, 64, 1, rngs)
        self.b5 = nnx.List([BasicConv(cin, 48, 1, rngs), BasicConv(48, 64, 5, rngs, pad=2)])
        self.b3 = nnx.List(
            [
                BasicConv(cin, 64, 1, rngs),
                BasicConv(64, 96, 3, rngs, pad=1),
                BasicConv(96, 96, 3, rngs, pad=1),
            ]
        )
        self.pool = BasicConv(cin, pool_features, 1, rngs)

    def __call__(self, x: Any) -> Any:
        branches = [self.b1(x), _chain(self.b5, x), _chain(self.b3, x), self.pool(_avg_pool(x))]
        return jnp.concatenate(branches, axis=-1)


class InceptionB(nnx.Module):
    def __init__(self, cin: int, rngs: nnx.Rngs) -> None:
        self.b3 = BasicConv(cin, 384, 3, rngs, stride=2)
        self.b3dbl = nnx.List(
            [
                BasicConv(cin, 64, 1, rngs),
                BasicConv(64, 96, 3, rngs, pad=1),
                BasicConv(96, 96, 3, rngs, stride=2),
            ]
        )

    def __call__(self, x: Any) -> Any:
        return jnp.concatenate([self.b3(x), _chain(self.b3dbl, x), _max_pool(x)], axis=-1)


class InceptionC(nnx.Module):
    def __init__(self, cin: int, c7: int, rngs: nnx.Rngs) -> None:
        row, col = ((1, 7), (0, 3)), ((7, 1), (3, 0))  # (kernel, padding) of a 1x7, a 7x1
        self.b1 = BasicConv(cin, 192, 1, rngs)
        self.b7 = nnx.List(
            [
                BasicConv(cin, c7, 1, rngs),
                BasicConv(c7, c7, row[0], rngs, pad=row[1]),
                BasicConv(c7, 192, col[0], rngs, pad=col[1]),
            ]
        )
        self.b7dbl = nnx.List(
            [
                BasicConv(cin, c7, 1, rngs),
                BasicConv(c7, c7, col[0], rngs, pad=col[1]),
                BasicConv(c7, c7, row[0], rngs, pad=row[1]),
                BasicConv(c7, c7, col[0], rngs, pad=col[1]),
                BasicConv(c7, 192, row[0], rngs, pad=row[1]),
            ]
        )
        self.pool = BasicConv(cin, 192, 1, rngs)

    def __call__(self, x: Any) -> Any:
        branches = [self.b1(x), _chain(self.b7, x), _chain(self.b7dbl, x)]
        return jnp.concatenate([*branches, self.pool(_avg_pool(x))], axis=-1)


class InceptionD(nnx.Module):
    def __init__(self, cin: int, rngs: nnx.Rngs) -> None:
        self.b3 = nnx.List([BasicConv(cin, 192, 1, rngs), BasicConv(192, 320, 3, rngs, stride=2)])
        self.b7x3 = nnx.List(
            [
                BasicConv(cin, 192, 1, rngs),
                BasicConv(192, 192, (1, 7), rngs, pad=(0, 3)),
                BasicConv(192, 192, (7, 1), rngs, pad=(3, 0)),
                BasicConv(192, 192, 3, rngs, stride=2),
            ]
        )

    def __call__(self, x: Any) -> Any:
        return jnp.concatenate([_chain(self.b3, x), _chain(self.b7x3, x), _max_pool(x)], axis=-1)


class InceptionE(nnx.Module):
    def __init__(self, cin: int, rngs: nnx.Rngs) -> None:
        self.b1 = BasicConv(cin, 320, 1, rngs)
        self.b3 = BasicConv(cin, 384, 1, rngs)
        self.b3a = BasicConv(384, 384, (1, 3), rngs, pad=(0, 1))
        self.b3b = BasicConv(384, 384, (3, 1), rngs, pad=(1, 0))
        self.b3dbl = nnx.List([BasicConv(cin, 448, 1, rngs), BasicConv(448, 384, 3, rngs, pad=1)])
        self.b3dbl_a = BasicConv(384, 384, (1, 3), rngs, pad=(0, 1))
        self.b3dbl_b = BasicConv(384, 384, (3, 1), rngs, pad=(1, 0))
        self.pool = BasicConv(cin, 192, 1, rngs)

    def __call__(self, x: Any) -> Any:
        b3 = self.b3(x)
        dbl = _chain(self.b3dbl, x)
        return jnp.concatenate(
            [
                self.b1(x),
                self.b3a(b3),
                self.b3b(b3),
                self.b3dbl_a(dbl),
                self.b3dbl_b(dbl),
                self.pool(_avg_pool(x)),
            ],
            axis=-1,
        )


class InceptionV3(nnx.Module):
    def __init__(self, num_classes: int, rngs: nnx.Rngs) -> None:
        self.stem = nnx.List(
            [
                BasicConv(3, 32, 3, rngs, stride=2),
                BasicConv(32, 32, 3, rngs),
                BasicConv(32, 64, 3, rngs, pad=1),
            ]
        )
        self.stem2 = nnx.List([BasicConv(64, 80, 1, rngs), BasicConv(80, 192, 3, rngs)])
        self.mixed5 = nnx.List(
            [InceptionA(192, 32, rngs), InceptionA(256, 64, rngs), InceptionA(288, 64, rngs)]
        )
        self.mixed6a = InceptionB(288, rngs)
        self.mixed6 = nnx.List([InceptionC(768, c7, rngs) for c7 in (128, 160, 160, 192)])
        self.mixed7a = InceptionD(768, rngs)
        self.mixed7 = nnx.List([InceptionE(1280, rngs), InceptionE(2048, rngs)])
        self.dropout = nnx.Dropout(0.5, rngs=rngs)
        self.fc = nnx.Linear(2048, num_classes, rngs=rngs)

    def __call__(self, x: Any) -> Any:
        x = _max_pool(_chain(self.stem, x))
        x = _max_pool(_chain(self.stem2, x))
        for a in self.mixed5:
            x = a(x)
        x = self.mixed6a(x)
        for c in self.mixed6:
            x = c(x)
        x = self.mixed7a(x)
        for e in self.mixed7:
            x = e(x)
        return self.fc(self.dropout(x.mean(axis=(1, 2))))


def inception_v3(num_classes: int, seed: int = 0) -> InceptionV3:
    return InceptionV3(num_classes, nnx.Rngs(seed))
