"""Flax NNX data parallelism the JAX way (strategy `sharded`): one process, a `Mesh` over
the devices, the global batch sharded on its batch axis (`NamedSharding`), the model's
and optimizer's state replicated, and the step under `jax.jit` with those shardings:
XLA inserts the gradients' all-reduce. Imports JAX: loaded only inside a rank process.

On a CPU the devices are XLA's host devices: the launcher starts the rank with
`--xla_force_host_platform_device_count` set to the replicas (the strategy's `env`),
so one CPU is split into that many devices, which share the process's cores: this
measures the strategy's machinery (sharding, the all-reduce), not added compute, as
MirroredStrategy over logical CPU devices does. The record says so (`describe`).

BatchNorm under a sharded batch normalises over the global batch (its mean and variance
are reductions XLA completes across the devices), as SyncBatchNorm would; DDP and
MirroredStrategy normalise each replica's batch alone. Recorded too.
"""

from __future__ import annotations

from typing import Any

from fwbench.case import Case
from fwbench.distributed.base import DistributedWorkload, split_cpu
from fwbench.frameworks.base import Adapter
from fwbench.frameworks.flax_nnx import FlaxWorkload

AXIS = "data"


def _devices(case: Case) -> list[Any]:
    import jax

    platform = "gpu" if case.device == "cuda" else "cpu"
    return [d for d in jax.devices() if d.platform == platform]


class ShardedWorkload(FlaxWorkload, DistributedWorkload):
    def __init__(self, adapter: Adapter, case: Case) -> None:
        import numpy as np
        from jax.sharding import Mesh

        devices = _devices(case)[: case.replicas]
        self.mesh = Mesh(np.array(devices), (AXIS,))
        self.on_gpu = case.device == "cuda"
        self.device_names = [str(d) for d in devices]
        model = adapter.build_model(case.reference, case.dims)
        super().__init__(model, case, case.model_spec, mesh=self.mesh)

    def describe(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "backend": "jax.sharding: a Mesh over the devices, NamedSharding on the batch "
            "axis; XLA's all-reduce of the gradients",
            "launcher": "one process driving every device",
            "devices": self.device_names,
            "batch_norm": "statistics over the global batch (as SyncBatchNorm); DDP and "
            "MirroredStrategy use each replica's own",
        }
        if not self.on_gpu:
            found["logical_devices"] = split_cpu(
                len(self.device_names),
                "XLA host device(s)",
                "--xla_force_host_platform_device_count",
            )
        return found


def unsupported_reason(case: Case) -> str | None:
    found = len(_devices(case))
    if found >= case.replicas:
        return None
    kind = "GPUs" if case.device == "cuda" else "XLA host devices"
    return (
        f"jax.sharding over {case.replicas} replicas needs {case.replicas} {kind}; "
        f"this process has {found}"
    )


def build(adapter: Adapter, case: Case, rank: int, world: int) -> DistributedWorkload:
    return ShardedWorkload(adapter, case)
