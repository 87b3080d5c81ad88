"""PyTorch's builders of the zoo's models (torchvision for vision, fwbench's twins for
the sequence models), registered for the zoo's names: the zoo declares what a model is
(fwbench.models.vision, language, speech), each framework brings how it builds it.

Framework-free: each builder imports its framework's code when it is called, in a
worker (by name, so that the command's process, which registers this table, imports no
framework; the runtimes that export PyTorch's models read this table too)."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import Builder, register_builders
from fwbench.models.builders import twin


def _torchvision(name: str, **options: Any) -> Builder:
    def build(num_classes: int, input_size: int) -> Any:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, num_classes=num_classes, **options)

    return build


register_builders(
    "torch",
    {
        **{
            name: _torchvision(name)
            for name in (
                "resnet18",
                "resnet50",
                "resnet152",
                "vgg16",
                "mobilenet_v2",
                "efficientnet_b4",
            )
        },
        # No auxiliary classifier: keras.applications' InceptionV3 has none, and it would
        # be extra work in training only.
        "inception_v3": _torchvision("inception_v3", aux_logits=False, init_weights=False),
        **{name: twin("torch_gpt", name) for name in ("gpt2", "gpt2_tiny")},
        **{
            name: twin("torch_sequence", name)
            for name in ("bert_base", "transformer_base", "lstm_lm", "lstm_lm_cell", "deepspeech2")
        },
    },
)
