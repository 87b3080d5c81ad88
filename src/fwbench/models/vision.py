"""The vision zoo: what each network is. Its builders are each framework's
(fwbench.models.torch_zoo: torchvision; keras_zoo: keras.applications and fwbench's
ResNets); every builder returns logits (no final softmax), so all frameworks train on
the same loss, with random weights: nothing is downloaded.
"""

from __future__ import annotations

from fwbench.catalog.models import ModelSpec, register


def _vision(name: str, description: str) -> None:
    register(
        ModelSpec(
            name=name,
            family="vision",
            input_kind="image",
            default_input_size=224,
            # keras.applications refuses inputs under 32 pixels; torchvision would
            # pool them away to nothing.
            min_input_size=32,
            description=description,
        )
    )


# ResNets: torchvision's v1.5 architecture in every framework (see keras_resnet.py).
_vision("resnet18", "ResNet-18")
_vision("resnet50", "ResNet-50 v1.5 (torchvision's)")
_vision("resnet152", "ResNet-152 v1.5 (torchvision's)")
_vision("vgg16", "VGG-16 (no batch norm)")
_vision("mobilenet_v2", "MobileNetV2, width 1.0")
_vision("efficientnet_b4", "EfficientNet-B4")
register(
    ModelSpec(
        name="inception_v3",
        family="vision",
        input_kind="image",
        description="Inception-v3, no auxiliary head (299 px)",
        dims={"input_size": 299, "num_classes": 1000},
        # Both libraries refuse inputs under 75 pixels.
        min_dims={"input_size": 75},
    )
)
