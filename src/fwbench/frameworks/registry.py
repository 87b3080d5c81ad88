"""Framework metadata that the CLI can read without importing any framework.

A new framework is one adapter module plus one entry here.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fwbench.frameworks.base import Adapter


@dataclass(frozen=True)
class FrameworkInfo:
    name: str
    label: str
    modes: tuple[str, ...]
    devices: tuple[str, ...]
    # Top-level packages the adapter needs; checked with find_spec, never imported here.
    packages: tuple[str, ...]
    adapter_path: str  # "module:Class", imported only inside a worker
    # Distribution names the framework may be installed under (CPU and CUDA flavours).
    distributions: tuple[str, ...]
    # Modes that need a CUDA device, and why.
    cuda_modes: tuple[tuple[str, str], ...] = ()
    native_layout: str = "channels_first"
    # How the framework is normally used: the mode of "default vs default" comparisons.
    default_mode: str = "eager"
    # Precisions it implements; models built by another framework's builders (the Keras
    # 3 builders, registered under "tensorflow", serve every Keras backend).
    precisions: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16")
    models_from: str | None = None
    # Whose compute kernels it runs, when another framework's (`fwbench peak` skips it).
    kernels_of: str | None = None
    # Modules a fork server imports after the adapter module, so forked workers start
    # with them loaded (fwbench.launch.forkserver). Importing them must start no thread
    # and initialise no device.
    preload: tuple[str, ...] = ()

    def installed(self) -> bool:
        return all(importlib.util.find_spec(p) is not None for p in self.packages)

    def version(self) -> str | None:
        """Installed version, read from package metadata: nothing is imported."""
        for dist in self.distributions:
            try:
                return metadata.version(dist)
            except metadata.PackageNotFoundError:
                continue
        return None

    def load_adapter(self) -> Adapter:
        module_name, _, class_name = self.adapter_path.partition(":")
        cls = getattr(importlib.import_module(module_name), class_name)
        adapter: Adapter = cls()
        return adapter


FRAMEWORKS: dict[str, FrameworkInfo] = {
    info.name: info
    for info in (
        FrameworkInfo(
            name="torch",
            label="PyTorch",
            # compile*: torch.compile with inductor in its default, reduce-overhead and
            # max-autotune modes; script: TorchScript by tracing.
            modes=(
                "eager",
                "compile",
                "compile-reduce-overhead",
                "compile-max-autotune",
                "script",
            ),
            devices=("cpu", "cuda"),
            packages=("torch", "torchvision"),
            adapter_path="fwbench.frameworks.torch:TorchAdapter",
            preload=("torchvision",),
            distributions=("torch",),
            cuda_modes=(
                ("compile-reduce-overhead", "its gain is CUDA graphs, which need a CUDA device"),
            ),
            native_layout="channels_first",
        ),
        FrameworkInfo(
            name="tensorflow",
            label="TensorFlow",
            modes=("eager", "graph", "xla"),
            devices=("cpu", "cuda"),
            packages=("tensorflow", "keras"),
            adapter_path="fwbench.frameworks.tensorflow:TensorFlowAdapter",
            distributions=("tensorflow", "tensorflow-cpu", "tensorflow-gpu"),
            native_layout="channels_last",
            default_mode="graph",  # Keras' own fit() runs a tf.function
        ),
        FrameworkInfo(
            name="keras-jax",
            label="JAX (Keras 3)",
            modes=("jit", "eager"),
            devices=("cpu", "cuda"),
            packages=("jax", "keras"),
            adapter_path="fwbench.frameworks.keras_jax:KerasJaxAdapter",
            preload=("jax", "keras"),
            distributions=("jax",),
            native_layout="channels_last",
            default_mode="jit",
            precisions=("fp32", "bf16"),
            models_from="tensorflow",
        ),
        FrameworkInfo(
            name="keras-torch",
            label="Keras 3 on PyTorch",
            modes=("eager",),
            devices=("cpu", "cuda"),
            packages=("torch", "keras"),
            adapter_path="fwbench.frameworks.keras_torch:KerasTorchAdapter",
            preload=("keras",),
            distributions=("keras",),
            native_layout="channels_last",
            precisions=("fp32", "bf16"),
            models_from="tensorflow",
            kernels_of="torch",
        ),
    )
}


def get_framework(name: str) -> FrameworkInfo:
    try:
        return FRAMEWORKS[name]
    except KeyError:
        from fwbench.errors import SpecError

        raise SpecError(
            f"unknown framework {name!r}; valid choices: {', '.join(FRAMEWORKS)}"
        ) from None
