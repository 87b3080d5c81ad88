"""Flax NNX's builders of the zoo's models (framework `flax`): torchvision's ResNets
(flax_resnet.py), VGG-16, MobileNetV2 and EfficientNet-B4 (flax_vision.py) and
Inception-v3 (flax_inception.py), and GPT-2 (flax_gpt.py).
Framework-free: each builder imports Flax when it is called, in a worker. The zoo's other
models are refused for `flax` by name before any work."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import Builder, register_builders


def _resnet(depth: int) -> Builder:
    def build(num_classes: int, input_size: int) -> Any:
        from fwbench.models.flax_resnet import resnet

        return resnet(depth, num_classes=num_classes)

    return build


def _vision(name: str) -> Builder:
    def build(num_classes: int, input_size: int) -> Any:
        from fwbench.models import flax_vision

        return getattr(flax_vision, name)(num_classes=num_classes)

    return build


def _inception(num_classes: int, input_size: int) -> Any:
    from fwbench.models.flax_inception import inception_v3

    return inception_v3(num_classes=num_classes)


def _gpt(name: str) -> Builder:
    def build(seq_len: int, vocab_size: int) -> Any:
        from fwbench.models.flax_gpt import gpt2

        return gpt2(name, seq_len, vocab_size)

    return build


register_builders(
    "flax",
    {
        **{f"resnet{depth}": _resnet(depth) for depth in (18, 50, 152)},
        "vgg16": _vision("vgg16"),
        "mobilenet_v2": _vision("mobilenet_v2"),
        "efficientnet_b4": _vision("efficientnet_b4"),
        "inception_v3": _inception,
        **{name: _gpt(name) for name in ("gpt2", "gpt2_tiny")},
    },
)
