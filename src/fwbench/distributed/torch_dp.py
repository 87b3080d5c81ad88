"""PyTorch data parallelism: DistributedDataParallel (one process per replica, started by
torchrun) and DataParallel (one process, one replica per CUDA device). Imports torch:
loaded only inside a rank process."""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DataParallel, DistributedDataParallel

from fwbench.case import Case
from fwbench.distributed.base import DistributedWorkload
from fwbench.frameworks.base import Adapter
from fwbench.frameworks.torch import TorchWorkload


class DDPWorkload(TorchWorkload, DistributedWorkload):
    """Each rank feeds its own per-replica batch (DDP takes the per-process batch);
    gradients are averaged across ranks in backward, bucket by bucket."""

    def __init__(self, model: torch.nn.Module, case: Case, device: torch.device) -> None:
        super().__init__(model, case, case.model_spec, device)
        # The optimizer built above holds the same parameter tensors DDP synchronises.
        ids = [device.index] if device.type == "cuda" else None
        self.forward = DistributedDataParallel(self.model, device_ids=ids)
        self.backend = dist.get_backend()

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "launcher": "torchrun (torch.distributed.run)",
            "bucket_cap_mb": 25,  # DDP's default; not changed here
        }

    def close(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()


class DPWorkload(TorchWorkload, DistributedWorkload):
    """DataParallel takes the global batch on the first device and scatters it; one
    Python thread per device in one process."""

    def __init__(self, model: torch.nn.Module, case: Case, replicas: int) -> None:
        # The global batch is the unit DataParallel takes: per-replica x replicas.
        global_case = case.model_copy(update={"batch_size": case.global_batch_size})
        super().__init__(model, global_case, case.model_spec, torch.device("cuda:0"))
        self.forward = DataParallel(self.model, device_ids=list(range(replicas)))

    def describe(self) -> dict[str, Any]:
        return {"backend": "DataParallel (scatter / gather, one thread per device)"}

    def sync(self) -> None:
        torch.cuda.synchronize()  # every device, not only the first


def unsupported_reason(case: Case) -> str | None:
    n = case.replicas
    if case.strategy == "dp":
        if case.device != "cuda":
            return (
                f"DataParallel needs {n} CUDA device(s), one per replica; "
                "this case runs on the CPU, which DataParallel cannot split"
            )
        found = torch.cuda.device_count()
        if found < n:
            return (
                f"DataParallel needs {n} CUDA devices (one per replica); this machine has {found}"
            )
    if case.strategy == "ddp" and case.device == "cuda":
        found = torch.cuda.device_count()
        if found < n:
            return f"DDP with nccl needs one CUDA device per rank ({n}); this machine has {found}"
    return None


def build(adapter: Adapter, case: Case, rank: int, world: int) -> DistributedWorkload:
    model = adapter.build_model(case.reference, case.dims)
    if case.strategy == "dp":
        return DPWorkload(model, case, case.replicas)
    if case.device == "cuda":
        device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}")
        torch.cuda.set_device(device)
        backend = "nccl"
    else:
        device, backend = torch.device("cpu"), "gloo"
    # torchrun's environment (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) is the rendezvous.
    dist.init_process_group(backend, rank=rank, world_size=world)
    # Distinct synthetic data per rank, as a sharded dataset would give.
    torch.manual_seed(rank)
    return DDPWorkload(model, case, device)
