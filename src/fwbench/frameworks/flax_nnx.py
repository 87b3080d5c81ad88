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

Synchronised with `jax.block_until_ready`. A generation (`FlaxGenerate`, the zoo's
GPT-2) runs its prefill and decoding step the same three ways, through a static
key/value cache (fwbench.models.flax_gpt). Imported in workers only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec, Optimizer, get_model
from fwbench.frameworks import generation
from fwbench.frameworks.base import (
    NO_FLOATS,
    Adapter,
    OutputCheck,
    OutputShapeError,
    TaskNotImplemented,
    Workload,
    check_user_logits,
    synthetic_arrays,
    tensors_in,
    workload_class,
)
from fwbench.frameworks.generation import GenerateWorkload
from fwbench.frameworks.jax_common import JaxRuntime
from fwbench.models.sources.flax_callable import trainable
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


def _as_array(tensor: Any) -> Any:
    """A JAX array as NumPy, floats as float32 (NumPy has no bfloat16): the output sample
    a user's model keeps for the check across frameworks."""
    import jax.numpy as jnp

    if jnp.issubdtype(tensor.dtype, jnp.floating):
        tensor = tensor.astype(jnp.float32)
    return np.asarray(tensor)


class UserLoss:
    """A user's module's loss, as the other frameworks' adapters compute it: the mean of
    its floating-point outputs, or cross-entropy of its first output (logits: batch x
    classes, or batch x positions x vocabulary) against random labels (a fixed seed),
    made the first time, where the logits' shape is known (traced: a constant of the
    step; eager: not drawn again each step)."""

    def __init__(self, name: str, batch: int) -> None:
        self.name, self.batch = name, batch
        self.labels: Any = None

    def __call__(self, out: Any) -> Any:
        import jax.numpy as jnp
        import optax

        found = tensors_in(out)
        if self.name == "mean":
            floats = [t for t in found if jnp.issubdtype(t.dtype, jnp.floating)]
            if not floats:
                raise OutputShapeError(NO_FLOATS)
            return sum(jnp.mean(t.astype(jnp.float32)) for t in floats)
        logits = found[0].astype(jnp.float32)
        shape = tuple(logits.shape)
        check_user_logits(self.name, self.batch, shape)
        if self.labels is None:
            rng = np.random.default_rng(0)
            self.labels = rng.integers(0, shape[-1], shape[:-1]).astype(np.int32)
        return optax.softmax_cross_entropy_with_integer_labels(logits, self.labels).mean()


def carried(case: Case) -> tuple[Callable[[Any], Any], str]:
    """How a `jit` step's state crosses jax.jit (the setting `state`), and its words: as
    nnx.split gives it, a State of nnx.Variables (JAX flattens each in Python on every
    call), or as its arrays alone (nnx.as_pure, which nnx.merge takes as well)."""
    from flax import nnx

    if case.option_values.get("state") == "arrays":
        return nnx.as_pure, "the state passed as its arrays (nnx.as_pure)"
    return (lambda state: state), "the state passed as nnx.Variables"


def compute_in(model: Any, precision: str | None) -> bool:
    """Flax's mixed precision for bf16 (returns whether it is on): each layer computes in
    its `dtype`, its parameters stay in their `param_dtype` (float32), as Keras'
    mixed_bfloat16 policy does."""
    import jax.numpy as jnp
    from flax import nnx

    if precision != "bf16":
        return False
    for _, layer in nnx.iter_modules(model):
        if hasattr(layer, "dtype"):
            layer.dtype = jnp.bfloat16
    return True


class FlaxWorkload(Workload):
    """`train` (the zoo's models: cross-entropy against random labels; a user's: its
    objective, USER_OBJECTIVES) with the model's optimizer, and `infer` (BatchNorm on its
    running averages), in the case's mode (the module's docstring)."""

    def __init__(self, model: Any, case: Case, spec: ModelSpec, mesh: Any = None) -> None:
        """`mesh`: train data-parallel over its devices (distributed/flax_dp.py), the
        global batch sharded on its batch axis, the state replicated (`jit` only)."""
        import jax
        import jax.numpy as jnp
        import optax
        from flax import nnx

        # Data-parallel: the whole global batch, sharded below.
        batch = case.global_batch_size if mesh is not None else case.batch_size
        self.param_count = trainable(model)
        self.mode = case.mode
        self.on_gpu = case.device == "cuda"
        self.trains = get_task(case.task).trains
        self.check = OutputCheck(case, spec.objective, _as_array, batch)
        # The same values as every other framework's (frameworks.base.synthetic_arrays);
        # Flax's convolutions are NHWC.
        inputs = tuple(
            jnp.asarray(v, dtype=jnp.bfloat16 if t.dtype == "bfloat16" else t.dtype)
            for t, v in synthetic_arrays(case, spec, index="int32", channels_last=True, batch=batch)
        )
        targets: tuple[Any, ...] = ()
        objective: Any = UserLoss(case.loss, batch)
        if case.inputs is None:
            rng = np.random.default_rng(0)
            if spec.objective == "lm":  # the next token at every position
                labels = rng.integers(0, case.dim("vocab_size"), (batch, case.dim("seq_len")))
            else:
                labels = rng.integers(0, case.dim("num_classes"), (batch,))
            targets = (jnp.asarray(labels),)

            def classify(out: Any, y: Any) -> Any:
                # Training returns the loss alone: its logits are checked here, when the
                # step is traced (static shapes; eagerly, on the first step).
                if self.check.pending:
                    self.check(out)
                logits = out.astype(jnp.float32)  # the loss in float32, as elsewhere
                return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

            objective = classify

        taken = len(inputs)

        mixed = compute_in(model, case.precision)

        def loss_of(model: Any, *args: Any) -> Any:
            return objective(model(*args[:taken]), *args[taken:])

        def train(model: Any, optimizer: Any, *args: Any) -> Any:
            loss, grads = nnx.value_and_grad(loss_of)(model, *args)
            optimizer.update(model, grads)
            return loss

        def infer(model: Any, *args: Any) -> Any:
            return model(*args)

        if self.trains:
            model.train()
            optimizer = nnx.Optimizer(model, optax_of(spec.optimizer), wrt=nnx.Param)
            objects: tuple[Any, ...] = (model, optimizer)
            work: Any = train
            args: tuple[Any, ...] = (*inputs, *targets)
        else:
            model.eval()
            objects, work, args = (model,), infer, inputs
        passed, how = carried(case)
        if self.mode == "jit":
            graphdef, state = nnx.split(objects)
            state = passed(state)

            def pure(state: Any, *args: Any) -> Any:
                merged = nnx.merge(graphdef, state)
                out = work(*merged, *args)
                if not self.trains:
                    # The output alone: the state is as it was (eval mode), and
                    # returning it would write a copy of every weight each step.
                    return out
                return out, passed(nnx.state(merged))

            # The state is donated when training: its buffers are updated in place, as in
            # the other frameworks' optimizers.
            donate = 0 if self.trains else ()
            if mesh is None:
                fn: Any = jax.jit(pure, donate_argnums=donate)
            else:
                from jax.sharding import NamedSharding, PartitionSpec

                replicated = NamedSharding(mesh, PartitionSpec())  # type: ignore[no-untyped-call]
                on_batch = NamedSharding(mesh, PartitionSpec(mesh.axis_names[0]))  # type: ignore[no-untyped-call]
                state = jax.device_put(state, replicated)
                args = tuple(jax.device_put(a, on_batch) for a in args)
                # XLA inserts the gradients' all-reduce: the update is the global batch's.
                fn = jax.jit(
                    pure,
                    in_shardings=(replicated, *[on_batch] * len(args)),
                    out_shardings=replicated,
                    donate_argnums=donate,
                )
            self.jitted: Any = fn
            self.state = state
            self.args = args

            def step() -> Any:
                if not self.trains:
                    return fn(self.state, *args)
                out, self.state = fn(self.state, *args)
                return out

        elif self.mode == "nnx-jit":
            fn = nnx.jit(work)
            self.jitted = fn
            self.objects, self.args = objects, args

            def step() -> Any:
                return fn(*objects, *args)

        else:
            self.jitted = None
            self.objects, self.args = objects, args

            def step() -> Any:
                return work(*objects, *args)

        self._step = step
        self._work = work
        self.last: Any = None
        self.settings_: dict[str, Any] = {
            "precision": case.precision or "fp32",
            "compute_dtype": "bfloat16" if mixed else "float32",
            "param_dtype": "float32",
            "layout": "channels_last",
            "flax_step": {
                "jit": (
                    f"nnx.split once, jax.jit over nnx.merge (state donated), {how}"
                    if self.trains
                    else f"nnx.split once, jax.jit over nnx.merge returning the output, {how}"
                ),
                "nnx-jit": "nnx.jit on the module and optimizer objects (nnx.jit returns "
                "their state from every call, as Flax's own wrapper does)",
                "eager": "op by op, unjitted",
            }[self.mode],
        }

    def step(self) -> None:
        self.last = self._step()
        if self.check.pending and not self.trains:
            self.check(self.last)

    def programs(self) -> list[tuple[Any, tuple[Any, ...], int]]:
        """The one function a step runs, with its arguments (FLOPs: JaxRuntime): `jit`'s
        own; in the other modes the same work over a split of the objects, traceable."""
        if self.mode == "jit":
            return [(self.jitted, (self.state, *self.args), 1)]
        from flax import nnx

        graphdef, state = nnx.split(self.objects)
        work = self._work

        def pure(state: Any, *args: Any) -> Any:
            return work(*nnx.merge(graphdef, state), *args)

        return [(pure, (state, *self.args), 1)]

    def sync(self) -> None:
        import jax

        # Dispatch is asynchronous: wait for the output and the updated state alike (in
        # eager and nnx-jit the optimizer's update is dispatched after the loss is made).
        if self.mode == "jit":
            state = self.state
        else:
            from flax import nnx

            state = nnx.state(self.objects) if self.trains else None
        jax.block_until_ready((self.last, state))  # type: ignore[no-untyped-call]

    def compiled_texts(self) -> list[str]:
        """The compiled program's text (the one program a step runs: `jit`'s, or the one
        `nnx.jit` compiles, lowered through its wrapper), which says what each op of a
        profile computes; none eagerly, whose ops are read by their programs' names (one
        per primitive, named after it)."""
        if self.mode == "jit":
            lowered = self.jitted.lower(self.state, *self.args)
        elif self.mode == "nnx-jit":
            lowered = self.jitted.lower(*self.objects, *self.args)
        else:
            return []
        return [str(lowered.compile().as_text())]

    def compile_count(self) -> int | None:
        return _compiled(self.jitted)

    def settings(self) -> dict[str, Any]:
        return self.settings_

    def counters(self) -> dict[str, Any]:
        count = self.compile_count()
        return {"jit_compilations": count} if count is not None else {}


class FlaxGenerate(GenerateWorkload):
    """Greedy generation of the zoo's GPT-2, or a decoder of the Llama family read from
    transformers' weights (models/flax_llama.py), from the weights every framework
    loads, through a static key/value cache (arrays of the whole generation's length,
    donated and so updated in place in `jit`), the prefill and the decoding step each
    one program: in `jit` a `jax.jit` function of the split state, in `nnx-jit` under
    `nnx.jit` with the model passed as an object, in `eager` unjitted. Each token is
    brought to the host as it is made (GenerateWorkload)."""

    def __init__(self, model: Any, case: Case, spec: ModelSpec) -> None:
        import jax
        import jax.numpy as jnp
        from flax import nnx

        from fwbench.models import flax_gpt

        if not isinstance(model, flax_gpt.Decoder):
            raise TaskNotImplemented(f"task {case.task}: {case.model} has no Flax generation")
        super().__init__(case)
        if isinstance(model, flax_gpt.GPT2):
            # The zoo's GPT-2: the weights every framework loads (a decoder read from
            # transformers' folder came with its own).
            flax_gpt.load_weights(model, generation.weights(case))
        model.eval()  # type: ignore[no-untyped-call]
        self.param_count = trainable(model)
        mixed = compute_in(model, case.precision)
        self.mode = case.mode
        context = self.prompt_len + self.new_tokens
        dtype = jnp.bfloat16 if mixed else jnp.float32
        self.cache = model.empty_cache(case.batch_size, context, dtype)
        self.ids = jnp.asarray(self.prompt_ids)
        self.model = model
        self.token: Any = None

        def run(model: Any, ids: Any, start: Any, cache: Any) -> Any:
            if ids.ndim == 1:  # a decoding step's token, made a sequence of one inside
                ids = ids[:, None]  # the program, as the Keras backends' steps do
            logits, cache = model.forward(ids, start, cache, last_only=True)
            return jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32), cache

        # jit: a jax.jit function of the split state for each program, the cache donated;
        # nnx-jit: an nnx.jit wrapper for each, the model passed as an object; eager: the
        # model's call. Two functions, so that a profile names each program apart
        # (jit_prefill, jit_step).
        self._run = run
        self.jitted: tuple[Any, ...] = ()
        self.lead: Any = model  # what each program takes before the ids
        passed, how = carried(case)
        if self.mode == "jit":
            graphdef, state = nnx.split(model)
            state = passed(state)

            def prefill(state: Any, ids: Any, start: Any, cache: Any) -> Any:
                return run(nnx.merge(graphdef, state), ids, start, cache)

            def step(state: Any, token: Any, start: Any, cache: Any) -> Any:
                return run(nnx.merge(graphdef, state), token, start, cache)

            self.jitted = (jax.jit(prefill, donate_argnums=3), jax.jit(step, donate_argnums=3))
            self.lead = state
        elif self.mode == "nnx-jit":

            def prefill(model: Any, ids: Any, start: Any, cache: Any) -> Any:  # type: ignore[misc]
                return run(model, ids, start, cache)

            def step(model: Any, token: Any, start: Any, cache: Any) -> Any:  # type: ignore[misc]
                return run(model, token, start, cache)

            self.jitted = (nnx.jit(prefill), nnx.jit(step))
        if self.jitted:
            first, following = self.jitted
            lead = self.lead
            self._first: Any = lambda ids, start, cache: first(lead, ids, start, cache)
            self._following: Any = lambda ids, start, cache: following(lead, ids, start, cache)
        else:
            self._first = self._following = lambda ids, start, cache: run(model, ids, start, cache)
        self.settings_ = {
            "precision": case.precision or "fp32",
            "compute_dtype": "bfloat16" if mixed else "float32",
            "param_dtype": "float32",
            **({"flax_step": how} if self.mode == "jit" else {}),
            **self.cache_settings(
                case, f"static: jax arrays of {context} positions, written at each position"
            ),
        }
        # Each position an array made before any timing, as the Keras backends' are: made
        # per step, it would cost a step 0.05 ms of fwbench's own (on a Xeon core).
        self.at = [jnp.asarray(p, jnp.int32) for p in range(context)]

    def programs(self) -> list[generation.Program]:
        """The prefill once, the decoding step for each token after the first, each over
        a split of the model (the same work in every mode), for their FLOPs."""
        import jax
        import jax.numpy as jnp
        from flax import nnx

        graphdef, state = nnx.split(self.model)
        run = self._run

        def program(state: Any, ids: Any, start: Any, cache: Any) -> Any:
            return run(nnx.merge(graphdef, state), ids, start, cache)

        token = jax.ShapeDtypeStruct((self.ids.shape[0],), jnp.int32)  # type: ignore[no-untyped-call]
        return [
            (program, (state, self.ids, self.at[0], self.cache), 1),
            (program, (state, token, self.at[self.prompt_len], self.cache), self.new_tokens - 1),
        ]

    def prefill(self) -> np.ndarray:
        # The cache's positions after the prompt are masked until written: nothing of the
        # last generation is read, so it needs no reset.
        self.token, self.cache = self._first(self.ids, self.at[0], self.cache)
        return np.asarray(self.token)

    def decode(self, tokens: np.ndarray, position: int) -> np.ndarray:
        self.token, self.cache = self._following(self.token, self.at[position], self.cache)
        return np.asarray(self.token)

    def compiled_texts(self) -> list[str]:
        """The prefill's and the decoding step's compiled programs' texts (`jit`, and
        `nnx-jit` lowered through its wrappers), which say what each op of a profile
        computes; none in eager."""
        import jax.numpy as jnp

        if not self.jitted:
            return []
        first, following = self.jitted
        token = jnp.zeros((len(self.prompt_ids),), jnp.int32)
        return [
            str(jitted.lower(self.lead, ids, self.at[at], self.cache).compile().as_text())
            for jitted, ids, at in ((first, self.ids, 0), (following, token, self.prompt_len))
        ]

    def logits(self, ids: np.ndarray) -> np.ndarray | None:
        import jax.numpy as jnp

        found: np.ndarray = _as_array(self.model(jnp.asarray(ids)))
        return found

    def compile_count(self) -> int | None:
        counts = [_compiled(jitted) or 0 for jitted in self.jitted]
        return sum(counts) if counts else None

    def counters(self) -> dict[str, Any]:
        count = self.compile_count()
        compiled = {"jit_compilations": count} if count is not None else {}
        return compiled | super().counters()


class FlaxAdapter(JaxRuntime, Adapter):
    name = "flax"
    libraries = ("flax", "optax")

    def configure(self, device: str, threads: int) -> dict[str, Any]:
        return self.configure_jax(device, threads)

    def environment(self, device: str) -> dict[str, Any]:
        from importlib.metadata import version

        return {**self.jax_environment(device), "flax": version("flax"), "optax": version("optax")}

    def build_model(self, model: str, dims: Mapping[str, int]) -> Any:
        return get_model(model).build("flax", dims)

    def count_params(self, model: Any) -> int:
        return trainable(model)

    def model_shapes(self, build: Callable[[], Any]) -> Any:
        from flax import nnx

        # Abstract arrays where the values would be: nothing computed, nothing compiled.
        return nnx.eval_shape(build)

    def build(self, case: Case) -> Workload:
        cls = workload_class(self.name, case)
        model = self.build_model(case.reference, case.dims)
        built: Workload = cls(model, case, case.model_spec)
        return built


def _compiled(jitted: Any) -> int | None:
    """Programs compiled so far by a step's jitted function: `jax.jit`'s cache, or under
    `nnx.jit` the cache of the `jax.jit` it wraps (`jitted_fn`: its graph definition is a
    static argument, so a changed module compiles again and shows here); None in eager."""
    if jitted is None:
        return None
    inner = getattr(jitted, "jitted_fn", jitted)
    return int(inner._cache_size())
