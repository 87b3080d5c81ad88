"""TensorFlow data parallelism: MultiWorkerMirroredStrategy (one process per replica,
TF_CONFIG on localhost) and MirroredStrategy (one process, one replica per GPU; on a CPU,
one replica per logical CPU device). Imports TensorFlow: loaded only inside a rank process.

MirroredStrategy on a CPU: the one physical CPU is split into `replicas` logical devices
(`tf.config.set_logical_device_configuration`, before TensorFlow's runtime starts), and
the strategy replicates over them. The logical devices share the process's thread pools
and cores: the replicas run side by side on the same cores, so this measures the
strategy's machinery (replication, all-reduce, per-replica feeding), not added compute.
The record says so (`describe`).

tf.distribute thinks in global batches: a dataset is batched globally and split. Here
each replica gets its own per-replica batch, made on its device with
`experimental_distribute_values_from_function` (the split a distributed dataset would
give, without an input pipeline), and the loss of each replica is its mean divided by
the number of replicas: Keras' optimizer sums the replicas' gradients, so the update is
the mean gradient over the global batch, as DDP's averaged gradients are.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from fwbench.case import Case
from fwbench.distributed.base import DistributedWorkload, split_cpu
from fwbench.frameworks.base import Adapter
from fwbench.frameworks.keras_common import make_optimizer, synthetic_inputs
from fwbench.frameworks.tensorflow import count_trainable, objective


class StrategyWorkload(DistributedWorkload):
    def __init__(self, adapter: Adapter, case: Case, strategy: tf.distribute.Strategy) -> None:
        spec = case.model_spec
        self.strategy = strategy
        self.replicas = int(strategy.num_replicas_in_sync)
        if self.replicas != case.replicas:
            raise RuntimeError(
                f"the strategy has {self.replicas} replicas; the case asks for {case.replicas}"
            )
        self.on_gpu = case.device == "cuda"
        with strategy.scope():
            self.model = adapter.build_model(case.reference, case.dims)
            self.optimizer = make_optimizer(spec.optimizer)
            # Slots now: creating variables inside the traced step is an error.
            self.optimizer.build(self.model.trainable_variables)
        self.param_count = count_trainable(self.model)
        _, self.loss_fn = objective(case, spec.objective)
        self.x = strategy.experimental_distribute_values_from_function(
            lambda _: synthetic_inputs(case, spec)
        )
        self.y = strategy.experimental_distribute_values_from_function(
            lambda _: objective(case, spec.objective)[0]
        )
        self.fn = tf.function(self._step)
        self.last: Any = None

    def _replica_step(self, x: Any, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = self.loss_fn(y, self.model(x, training=True)) / self.replicas
        grads = tape.gradient(loss, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables, strict=True))
        return loss

    def _step(self, x: Any, y: Any) -> tf.Tensor:
        per_replica = self.strategy.run(self._replica_step, args=(x, y))
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def step(self) -> None:
        self.last = self.fn(self.x, self.y)

    def sync(self) -> None:
        if self.on_gpu:
            tf.test.experimental.sync_devices()
        elif self.last is not None:
            self.last.numpy()  # the step's reduced loss: every replica has finished

    def counters(self) -> dict[str, Any]:
        return {"tf_function_traces": int(self.fn.experimental_get_tracing_count())}

    def describe(self) -> dict[str, Any]:
        if isinstance(self.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            impl = "NCCL" if self.on_gpu else "RING"
            return {
                "backend": f"collective ops, {impl} (CommunicationOptions)",
                "launcher": "one process per worker, TF_CONFIG on localhost",
            }
        # The strategy picks its cross-device ops by device: recorded as picked.
        ops = getattr(self.strategy.extended, "_cross_device_ops", None)  # private: may go
        picked = type(ops).__name__ if ops is not None else "not readable in this TensorFlow"
        found: dict[str, Any] = {
            "backend": f"MirroredStrategy default cross-device ops ({picked})",
            "devices": list(self.strategy.extended.worker_devices),
        }
        if not self.on_gpu:
            found["logical_devices"] = split_cpu(
                self.replicas, "logical CPU device(s)", "tf.config.set_logical_device_configuration"
            )
        return found


def unsupported_reason(case: Case) -> str | None:
    if case.strategy != "mirrored" or case.device != "cuda":
        return None  # on the CPU: logical devices (logical_cpus)
    n = case.replicas
    found = len(tf.config.list_physical_devices("GPU"))
    if found < n:
        return f"MirroredStrategy needs {n} GPUs (one per replica); this machine has {found}"
    return None


def build(adapter: Adapter, case: Case, rank: int, world: int) -> DistributedWorkload:
    strategy: tf.distribute.Strategy
    if case.strategy == "multiworker":
        impl = tf.distribute.experimental.CommunicationImplementation
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=impl.NCCL if case.device == "cuda" else impl.RING
        )
        # Reads TF_CONFIG, which the launcher set for this worker.
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
    elif case.device == "cuda":
        strategy = tf.distribute.MirroredStrategy([f"/gpu:{i}" for i in range(case.replicas)])
    else:
        strategy = tf.distribute.MirroredStrategy(logical_cpus(case.replicas))
    return StrategyWorkload(adapter, case, strategy)


def logical_cpus(n: int) -> list[str]:
    """Split this process's CPU into `n` logical devices; their names. Only before
    TensorFlow's runtime starts (no op run yet), which is where a rank builds."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    try:
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        )
    except RuntimeError as exc:
        raise RuntimeError(
            f"cannot split the CPU into {n} logical devices: TensorFlow's runtime had "
            f"already started ({exc})"
        ) from exc
    return [d.name for d in tf.config.list_logical_devices("CPU")]
