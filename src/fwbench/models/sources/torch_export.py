"""A PyTorch program exported by `torch.export` and saved (`torch.export.save`, a
`PATH.pt2` file): its module runs on PyTorch in every mode, and exported again to ONNX
for the runtimes.

Its inputs are the program's: the shapes of its example inputs, a dimension the export
made dynamic (`dynamic_shapes`) left to be given, the leading one by the batch size; a
dimension it fixed stays fixed (an export with a static batch takes that batch only)."""

from __future__ import annotations

from typing import Any

from fwbench.catalog.inputs import BATCH, TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import digest, existing, file_model, read_model


def claims(text: str) -> bool:
    return text.lower().endswith(".pt2")


def _program(path: str) -> Any:
    import torch

    return read_model(path, "a saved torch.export program", torch.export.load)


def build(path: str) -> Any:
    """The program's module, in a module whose train() and eval() change nothing: an
    exported graph fixed dropout's and normalisation's behaviour when it was exported (its
    module refuses both calls), and PyTorch's adapter makes them for every model."""
    import torch

    class Exported(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(*args)

        def train(self, mode: bool = True) -> Exported:
            self.training = mode
            return self

    return Exported(_program(path).module())


def resolve(text: str) -> ModelSpec:
    path = existing(text, "a torch.export program")
    content = digest(path)
    return file_model(
        str(path), content, path.name,
        family="torch.export",
        builders={"torch": lambda **_: build(str(path))},
        description=f"torch.export program {path}",
    )  # fmt: skip


def describe(spec: ModelSpec) -> dict[str, Any]:
    import torch

    from fwbench.models.sources.torch_common import dtype_name

    program = _program(spec.reference)
    user = set(program.graph_signature.user_inputs)
    inputs = []
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise SpecError(f"model: {spec.reference}: input {node.name} is not a tensor")
        dims: tuple[int | str | None, ...] = tuple(
            d if isinstance(d, int) else None for d in value.shape
        )
        if dims and dims[0] is None:
            dims = (BATCH, *dims[1:])  # a dynamic leading dimension: the batch
        inputs.append(TensorSpec(node.name, dims, dtype_name(value.dtype)))
    params = sum(
        int(program.state_dict[name].numel())
        for name in program.graph_signature.parameters
        if name in program.state_dict
    )
    return {"inputs": format_signature(inputs), "params": params, "outputs": ""}
