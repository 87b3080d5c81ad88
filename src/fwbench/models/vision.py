"""The vision zoo: torchvision on the PyTorch side, keras.applications on TensorFlow's.

Every builder returns logits (no final softmax) so both frameworks train on the same
loss, and takes random weights: nothing is downloaded.
"""

from __future__ import annotations

from typing import Any

from fwbench.catalog.models import ModelSpec, register


def _torchvision(name: str) -> Any:
    def build(num_classes: int, input_size: int) -> Any:
        import torchvision

        return getattr(torchvision.models, name)(weights=None, num_classes=num_classes)

    return build


def _keras_app(name: str) -> Any:
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


def _keras_resnet(depth: int) -> Any:
    def build(num_classes: int, input_size: int) -> Any:
        from fwbench.models.keras_resnet import resnet

        return resnet(depth, num_classes=num_classes, input_size=input_size)

    return build


def _vision(name: str, torch_name: str, keras_builder: Any, description: str) -> None:
    register(
        ModelSpec(
            name=name,
            family="vision",
            input_kind="image",
            default_input_size=224,
            # keras.applications refuses inputs under 32 pixels; torchvision would
            # pool them away to nothing.
            min_input_size=32,
            builders={"torch": _torchvision(torch_name), "tensorflow": keras_builder},
            description=description,
        )
    )


# ResNets: torchvision's v1.5 architecture in both frameworks (see keras_resnet.py).
_vision("resnet18", "resnet18", _keras_resnet(18), "ResNet-18")
_vision("resnet50", "resnet50", _keras_resnet(50), "ResNet-50 v1.5 (torchvision's)")
_vision("resnet152", "resnet152", _keras_resnet(152), "ResNet-152 v1.5 (torchvision's)")
_vision("vgg16", "vgg16", _keras_app("VGG16"), "VGG-16 (no batch norm)")
_vision("mobilenet_v2", "mobilenet_v2", _keras_app("MobileNetV2"), "MobileNetV2, width 1.0")
_vision("efficientnet_b4", "efficientnet_b4", _keras_app("EfficientNetB4"), "EfficientNet-B4")


def _torch_inception(num_classes: int, input_size: int) -> Any:
    import torchvision

    # No auxiliary classifier: keras.applications' InceptionV3 has none, and it would be
    # extra work in training only.
    return torchvision.models.inception_v3(
        weights=None, num_classes=num_classes, aux_logits=False, init_weights=False
    )


register(
    ModelSpec(
        name="inception_v3",
        family="vision",
        input_kind="image",
        builders={"torch": _torch_inception, "tensorflow": _keras_app("InceptionV3")},
        description="Inception-v3, no auxiliary head (299 px)",
        dims={"input_size": 299, "num_classes": 1000},
        # Both libraries refuse inputs under 75 pixels.
        min_dims={"input_size": 75},
    )
)
