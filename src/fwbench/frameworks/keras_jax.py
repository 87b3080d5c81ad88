"""JAX adapter, through Keras 3 on its JAX backend: the same Keras models as the
TensorFlow adapter, trained with a jitted, stateless step (`stateless_call`,
`jax.value_and_grad`, `optimizer.stateless_apply`), synchronised with
`block_until_ready`. The framework is named `keras-jax` in every result.

JAX is imported in `configure`, after the thread limit is applied: XLA sizes its CPU
thread pool when it starts.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np

os.environ["KERAS_BACKEND"] = "jax"  # read once, when keras is first imported

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec
from fwbench.frameworks.base import OutputCheck, Workload
from fwbench.frameworks.jax_common import JaxRuntime
from fwbench.frameworks.keras_common import (
    KerasBackendAdapter,
    KerasLora,
    as_array,
    count_trainable,
    keras_module,
    make_optimizer,
    objective,
    synthetic_inputs,
)
from fwbench.tasks import get_task

MODES = {"jit": True, "eager": False}


class KerasJaxWorkload(Workload):
    def __init__(self, model: Any, case: Case, spec: ModelSpec) -> None:
        import jax

        self.model = model
        self.param_count = count_trainable(model)
        self.on_gpu = case.device == "cuda"  # which of a profile's planes holds its ops
        rng = np.random.default_rng(0)
        self.x = synthetic_inputs(case, spec)
        self.y, loss_fn = objective(case, case.loss, rng)
        trainable = [v.value for v in model.trainable_variables]
        frozen = [v.value for v in model.non_trainable_variables]
        jit = MODES[case.mode]
        trains = get_task(case.task).trains
        if trains:
            optimizer = make_optimizer(spec.optimizer)
            optimizer.build(model.trainable_variables)

            def train(state: Any, x: Any, y: Any) -> Any:
                tv, ntv, ov = state

                def loss_of(tv: Any) -> Any:
                    logits, ntv2 = model.stateless_call(tv, ntv, x, training=True)
                    return loss_fn(y, logits), ntv2

                (loss, ntv2), grads = jax.value_and_grad(loss_of, has_aux=True)(tv)
                tv2, ov2 = optimizer.stateless_apply(ov, grads, tv)
                return loss, (tv2, ntv2, ov2)

            # The state is donated: its buffers are updated in place, as in the other
            # frameworks' optimizers.
            self.fn: Any = jax.jit(train, donate_argnums=0) if jit else train
            self.state: Any = (trainable, frozen, [v.value for v in optimizer.variables])
        else:

            def infer(state: Any, x: Any, y: Any) -> Any:
                tv, ntv = state
                logits, _ = model.stateless_call(tv, ntv, x, training=False)
                # The logits alone, as Keras' predict returns them: a jitted function
                # that returns its unchanged state writes a copy of every weight.
                return logits

            self.fn = jax.jit(infer) if jit else infer
            self.state = (trainable, frozen)
        self.jit = jit
        self.last: Any = None
        self.settings_: dict[str, Any] = {}
        self.check = OutputCheck(case, spec.objective, as_array)
        self.infers = not trains

    def step(self) -> None:
        # Inference returns the logits and leaves the state as it was (training, the
        # loss and the updated state).
        if self.infers:
            self.last = self.fn(self.state, self.x, self.y)
            if self.check.pending:
                self.check(self.last)
        else:
            self.last, self.state = self.fn(self.state, self.x, self.y)

    def sync(self) -> None:
        import jax

        # Dispatch is asynchronous: wait for the output and the updated state alike.
        jax.block_until_ready((self.last, self.state))  # type: ignore[no-untyped-call]

    def compile_count(self) -> int | None:
        return int(self.fn._cache_size()) if self.jit else None

    def compiled_texts(self) -> list[str]:
        """The compiled step's text (jit), which says what each op of a profile computes
        (fwbench.explain.hlo); none eagerly, whose ops are read by their names."""
        if not self.jit:
            return []
        return [str(self.fn.lower(self.state, self.x, self.y).compile().as_text())]

    def settings(self) -> dict[str, Any]:
        return self.settings_

    def counters(self) -> dict[str, Any]:
        return {"jit_compilations": self.compile_count()} if self.jit else {}


class KerasJaxLora(KerasLora, KerasJaxWorkload):
    """Task lora: keras-hub's adapters, trained as KerasJaxWorkload trains."""


class KerasJaxAdapter(JaxRuntime, KerasBackendAdapter):
    name = "keras-jax"
    libraries = ("keras", "keras_hub")

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        settings = self.configure_jax(device, threads)
        keras = keras_module()
        return {**settings, "keras_backend": keras.backend.backend()}

    def environment(self, device: str) -> dict[str, Any]:
        return {**self.jax_environment(device), "keras": keras_module().__version__}

    def matmul(self, device: str, dtype: str, n: int) -> Workload:
        return _Matmul(dtype, n)


class _Matmul(Workload):
    def __init__(self, dtype: str, n: int) -> None:
        import jax
        import jax.numpy as jnp

        jdtype = {"fp32": jnp.float32, "tf32": jnp.float32, "bf16": jnp.bfloat16}.get(
            dtype, jnp.float16
        )
        key = jax.random.PRNGKey(0)
        self.a = jax.random.normal(key, (n, n), dtype=jdtype)
        self.b = jax.random.normal(key, (n, n), dtype=jdtype)
        precision = "tensorfloat32" if dtype == "tf32" else "highest"
        self.fn = jax.jit(functools.partial(jnp.matmul, precision=precision))
        self.last: Any = None
        self.param_count = 0

    def step(self) -> None:
        self.last = self.fn(self.a, self.b)

    def sync(self) -> None:
        if self.last is not None:
            self.last.block_until_ready()
