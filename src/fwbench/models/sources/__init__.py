"""Model sources: each module reads one kind of model a user has (a file, a callable, a
library architecture) for its entry in fwbench.catalog.sources. See that module for the
contract, and docs/your-model.md. The built-in ones are loaded here, with the zoo."""

from __future__ import annotations

from fwbench.models.sources import (  # noqa: F401
    hf,
    keras_model,
    onnx_file,
    saved_model,
    timm_arch,
    torch_callable,
    torch_export,
    twins,
)
