"""Keras 3's builders of the zoo's models, registered under TensorFlow's name for the
zoo's names: every Keras backend (TensorFlow, JAX, PyTorch) and LiteRT build from them
(their registry entries' `models_from`). keras.applications where it has the network
as torchvision has it, keras-hub's where it has it (GPT-2), fwbench's own twins where
neither does (the ResNets, v1.5, and the sequence models).

Framework-free: each builder imports Keras when it is called, in a worker."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import Builder, register_builders
from fwbench.models.builders import twin


def _keras_app(name: str) -> Builder:
    def build(num_classes: int, input_size: int) -> Any:
        import keras

        from fwbench.models.keras_resnet import image_shape

        return getattr(keras.applications, name)(
            weights=None,
            input_shape=image_shape(input_size),
            classes=num_classes,
            classifier_activation=None,
        )

    return build


def _resnet(depth: int) -> Builder:
    # torchvision's v1.5 architecture (see keras_resnet.py).
    def build(num_classes: int, input_size: int) -> Any:
        from fwbench.models.keras_resnet import resnet

        return resnet(depth, num_classes=num_classes, input_size=input_size)

    return build


register_builders(
    "tensorflow",
    {
        "resnet18": _resnet(18),
        "resnet50": _resnet(50),
        "resnet152": _resnet(152),
        "vgg16": _keras_app("VGG16"),
        "mobilenet_v2": _keras_app("MobileNetV2"),
        "efficientnet_b4": _keras_app("EfficientNetB4"),
        "inception_v3": _keras_app("InceptionV3"),
        # keras-hub's GPT-2 at the zoo's dimensions (keras_hub_lm.py).
        **{name: twin("keras_hub_lm", name) for name in ("gpt2", "gpt2_tiny")},
        **{
            name: twin("keras_sequence", name)
            for name in ("bert_base", "transformer_base", "lstm_lm", "lstm_lm_cell", "deepspeech2")
        },
    },
)
