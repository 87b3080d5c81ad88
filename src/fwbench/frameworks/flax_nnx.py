"""Flax NNX adapter (framework `flax`): JAX as its users write it, an `nnx.Module` and an
optax optimizer in an `nnx.Optimizer`, not a Keras model on JAX's backend.

Three modes, as Flax's performance guide describes them:
- `jit` (the default, the guide's fast path): the model and optimizer are split into a
  graph definition and a state once; the step is a `jax.jit` function of the state
  (donated, so it is updated in place) that merges them inside, so no Python walks the
  object graph per call.
- `nnx-jit`: the step under `nnx.jit`, the model and optimizer passed as objects, as most
  Flax code is written; `nnx.jit` walks their graph in Python on every call.
- `eager`: the same step, op by op, unjitted.

Synchronised with `jax.block_until_ready`. Imported in workers only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec, Optimizer, get_model
from fwbench.frameworks.base import Adapter, OutputCheck, Workload, workload_class
from fwbench.frameworks.jax_common import JaxRuntime
from fwbench.tasks import get_task


def optax_of(opt: Optimizer) -> Any:
    """The model's declared optimizer in optax, with the constants the other frameworks
    use (Keras' epsilon 1e-7, SGD's momentum as PyTorch applies it)."""
    import optax

    if opt.name == "adam":
        return optax.adam(opt.learning_rate, eps=1e-7)
    if opt.name == "adamw":
        return optax.adamw(opt.learning_rate, eps=1e-7, weight_decay=opt.weight_decay)
    return optax.sgd(opt.learning_rate, momentum=opt.momentum)


def trainable(model: Any) -> int:
    import jax
    from flax import nnx

    return int(sum(x.size for x in jax.tree.leaves(nnx.state(model, nnx.Param))))


def _as_array(tensor: Any) -> Any:
    return np.asarray(tensor)


class FlaxWorkload(Workload):
    """`train` (cross-entropy against random labels, the model's optimizer) and `infer`
    (BatchNorm on its running averages), in the case's mode (the module's docstring)."""

    def __init__(self, model: Any, case: Case, spec: ModelSpec) -> None:
        import jax
        import jax.numpy as jnp
        import optax
        from flax import nnx

        self.param_count = trainable(model)
        rng = np.random.default_rng(0)
        side = case.dim("input_size")
        self.x = jnp.asarray(
            rng.standard_normal((case.batch_size, side, side, 3), dtype=np.float32)
        )
        self.y = jnp.asarray(rng.integers(0, case.dim("num_classes"), (case.batch_size,)))
        self.mode = case.mode
        self.trains = get_task(case.task).trains
        self.check = OutputCheck(case, spec.objective, _as_array)

        mixed = case.precision == "bf16"
        if mixed:
            # Flax's mixed precision: each layer computes in its `dtype`, its parameters
            # stay in their `param_dtype` (float32), as Keras' mixed_bfloat16 policy does.
            for _, layer in nnx.iter_modules(model):
                if hasattr(layer, "dtype"):
                    layer.dtype = jnp.bfloat16

        def loss_of(model: Any, x: Any, y: Any) -> Any:
            logits = model(x).astype(jnp.float32)  # the loss in float32, as elsewhere
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

        def train(model: Any, optimizer: Any, x: Any, y: Any) -> Any:
            loss, grads = nnx.value_and_grad(loss_of)(model, x, y)
            optimizer.update(model, grads)
            return loss

        def infer(model: Any, x: Any) -> Any:
            return model(x)

        if self.trains:
            model.train()
            optimizer = nnx.Optimizer(model, optax_of(spec.optimizer), wrt=nnx.Param)
            objects: tuple[Any, ...] = (model, optimizer)
            work: Any = train
            args: tuple[Any, ...] = (self.x, self.y)
        else:
            model.eval()
            objects, work, args = (model,), infer, (self.x,)
        self.objects = objects
        if self.mode == "jit":
            graphdef, state = nnx.split(objects)

            def pure(state: Any, *args: Any) -> Any:
                merged = nnx.merge(graphdef, state)
                out = work(*merged, *args)
                return out, nnx.state(merged)

            # The state is donated when training: its buffers are updated in place, as in
            # the other frameworks' optimizers.
            fn: Any = jax.jit(pure, donate_argnums=0 if self.trains else ())
            self.jitted: Any = fn
            self.state = state

            def step() -> Any:
                out, self.state = fn(self.state, *args)
                return out

        elif self.mode == "nnx-jit":
            fn = nnx.jit(work)
            self.jitted = fn

            def step() -> Any:
                return fn(*objects, *args)

        else:
            self.jitted = None

            def step() -> Any:
                return work(*objects, *args)

        self._step = step
        self.last: Any = None
        self.settings_: dict[str, Any] = {
            "precision": case.precision or "fp32",
            "compute_dtype": "bfloat16" if mixed else "float32",
            "param_dtype": "float32",
            "layout": "channels_last",
            "flax_step": {
                "jit": "nnx.split once, jax.jit over nnx.merge (state donated)",
                "nnx-jit": "nnx.jit on the module and optimizer objects",
                "eager": "op by op, unjitted",
            }[self.mode],
        }

    def step(self) -> None:
        self.last = self._step()
        if self.check.pending and not self.trains:
            self.check(self.last)

    def sync(self) -> None:
        import jax

        # Dispatch is asynchronous: wait for the output and the updated state alike.
        state = self.state if self.mode == "jit" else None
        jax.block_until_ready((self.last, state))  # type: ignore[no-untyped-call]

    def compile_count(self) -> int | None:
        if self.mode == "jit":
            return int(self.jitted._cache_size())
        return None

    def settings(self) -> dict[str, Any]:
        return self.settings_

    def counters(self) -> dict[str, Any]:
        count = self.compile_count()
        return {"jit_compilations": count} if count is not None else {}


class FlaxAdapter(JaxRuntime, Adapter):
    name = "flax"

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        return self.configure_jax(device, threads)

    def environment(self, device: str) -> dict[str, Any]:
        from importlib.metadata import version

        return {**self.jax_environment(device), "flax": version("flax"), "optax": version("optax")}

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        return get_model(model).build("flax", dims)

    def count_params(self, model: Any) -> int:
        return trainable(model)

    def build(self, case: Case) -> Workload:
        cls = workload_class(self.name, case)
        model = self.build_model(case.reference, case.dims)
        built: Workload = cls(model, case, case.model_spec)
        return built
