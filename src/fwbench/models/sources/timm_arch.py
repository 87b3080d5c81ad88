"""Any timm architecture by name (`timm:NAME`), built with random weights
(`pretrained=False`: nothing is downloaded), the same weights in every worker (a fixed
seed). Its input is the architecture's default image size (its `pretrained_cfg`);
`--input-shape` may give another."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.inputs import TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import user_model

PREFIX = "timm:"


def claims(text: str) -> bool:
    return text.startswith(PREFIX)


def build(name: str) -> Any:
    import timm
    import torch

    if name not in timm.list_models():
        close = timm.list_models(f"*{name}*")[:8]
        hint = f"; similar: {', '.join(close)}" if close else "; see timm.list_models()"
        raise SpecError(f"model: timm has no architecture {name!r}{hint}")
    torch.manual_seed(0)
    return timm.create_model(name, pretrained=False)


def resolve(text: str) -> ModelSpec:
    name = text[len(PREFIX) :].strip()
    if not name or not all(c.isalnum() or c in "_.-" for c in name):
        raise SpecError(f"model: {text!r}: write timm:NAME (an architecture timm lists)")
    return user_model(
        f"{PREFIX}{name}",
        family="timm",
        builders={"torch": lambda **_: build(name)},
        description=f"timm's {name}, random weights",
    )


def describe(spec: ModelSpec) -> dict[str, Any]:
    import timm

    from fwbench.models.sources.torch_common import trainable

    model = build(spec.name[len(PREFIX) :])
    channels, height, width = model.pretrained_cfg.get("input_size", (3, 224, 224))
    # Its channels are fixed; its image size is usual, not required (a CNN takes others).
    inputs = [TensorSpec("x", ("B", channels, None, None), "float32")]
    usual = [TensorSpec("x", ("B", channels, height, width), "float32")]
    outputs = f"logits ({model.num_classes} classes)" if getattr(model, "num_classes", 0) else ""
    return {
        "inputs": format_signature(inputs),
        "defaults": format_signature(usual),
        "params": trainable(model),
        "outputs": outputs,
        "version": f"timm {timm.__version__}",
    }
