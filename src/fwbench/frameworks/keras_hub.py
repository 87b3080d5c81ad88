"""Greedy generation of a decoder read by keras-hub (fwbench.models.keras_hub_lm), the
same on Keras 3's three backends: keras-hub's own cached call (`call_with_cache`), the
prefill over the prompt, then one token a step, the key/value cache allocated once for
the whole generation in keras-hub's layout (its position written in place), so no
step's shapes change. Each backend runs it on its fast path: on JAX, the prefill and
the decoding step are each one jitted, stateless function of the weights (the cache
donated); on TensorFlow, each a tf.function (XLA-compiled in mode xla); on PyTorch,
eagerly under no_grad (Keras on PyTorch compiles nothing).

keras-hub's own `generate()` runs its prefill over the whole padded length (prompt and
the tokens still to come) and recomputes the prompt's last token in its first decoding
step: other work than transformers' prefill over the prompt alone. This loop is the
same work as PyTorch's, token for token (docs/decisions.md).

Imported in a worker of a Keras backend only."""

from __future__ import annotations

from typing import Any

import numpy as np

from fwbench.case import Case
from fwbench.catalog.models import ModelSpec
from fwbench.frameworks import generation
from fwbench.frameworks.base import TaskNotImplemented
from fwbench.frameworks.generation import GenerateWorkload
from fwbench.frameworks.keras_common import count_trainable, keras_module, logits_of


def _cache_shape(backbone: Any, batch: int, length: int) -> tuple[int, ...]:
    kv = getattr(backbone, "num_key_value_heads", None) or backbone.num_heads
    heads = next(
        getattr(backbone, name)
        for name in ("num_query_heads", "num_attention_heads", "num_heads")
        if hasattr(backbone, name)
    )
    width = getattr(backbone, "head_dim", None) or backbone.hidden_dim // heads
    return (batch, backbone.num_layers, 2, length, kv, width)


class KerasHubGenerate(GenerateWorkload):
    """See the module's docstring. `mode` is the case's: jit or eager on JAX, graph, xla
    or eager on TensorFlow, eager on PyTorch. With `--options decoding=loop`, in a
    compiled mode, the decoding steps after the prefill run as one compiled loop
    (`jax.lax.fori_loop` in the jitted function, `tf.while_loop` in the tf.function), as
    keras-hub's own generate() runs them: no token is read back until the last is made."""

    LOOPS = True

    def __init__(self, model: Any, case: Case, spec: ModelSpec) -> None:
        from fwbench.models import keras_hub_lm

        if not isinstance(model, keras_hub_lm.TokenIds):
            raise TaskNotImplemented(
                f"task {case.task}: {case.model} has no Keras generation (keras-hub's "
                "decoders generate: the zoo's GPT-2 and hf:ARCH)"
            )
        super().__init__(case)
        self.model = model
        if isinstance(model, keras_hub_lm.GPT2):
            # The zoo's GPT-2: the weights every framework loads, so their tokens agree (a
            # decoder read from transformers' folder came with its own).
            keras_hub_lm.load_gpt2_weights(model, generation.weights(case))
        keras = keras_module()
        ops = keras.ops
        lm = model.lm
        self.param_count = count_trainable(model)
        self.backend = keras.backend.backend()
        batch, context = case.batch_size, self.prompt_len + self.new_tokens
        shape = _cache_shape(lm.backbone, batch, context)
        dtype = lm.compute_dtype
        gemma3 = type(lm).__name__ == "Gemma3CausalLM"

        def empty() -> Any:
            if gemma3:  # keras-hub 0.32's Gemma3: a (key, value) pair per layer
                b, layers, _, length, kv, width = shape
                zeros = (b, length, kv, width)
                return tuple(
                    (ops.zeros(zeros, dtype), ops.zeros(zeros, dtype)) for _ in range(layers)
                )
            return ops.zeros(shape, dtype)

        def next_of(ids: Any, cache: Any, index: Any) -> Any:
            if isinstance(index, int):
                # A tensor, as the cache is: SmolLM3's layers refuse a call mixing the two.
                index = ops.convert_to_tensor(index, "int32")
            logits, _, cache = lm.call_with_cache(ids, cache, index)
            return ops.cast(ops.argmax(logits[:, -1, :], axis=-1), "int32"), cache

        self.compiled = case.mode in ("jit", "graph", "xla")
        if self.loop and not (self.compiled and self.backend in ("jax", "tensorflow")):
            raise TaskNotImplemented(
                "options: decoding=loop compiles the decoding steps into one loop: on JAX "
                "in mode jit, on TensorFlow in mode graph or xla"
            )
        self._rest: Any = None
        self.rest: Any = None
        self._raw: tuple[Any, Any] = (None, None)  # TensorFlow's prefill and step, untraced
        # The prefill and the decoding step (each compiled where the backend compiles),
        # and the calls that feed them this generation's prompt, token and cache.
        self._first: Any = None
        self._following: Any = None
        self.first: Any = None
        self.following: Any = None
        ids = generation.prompt(case)
        if self.backend == "jax":
            self._jax(lm, next_of, empty, ids)
        elif self.backend == "tensorflow":
            self._tensorflow(next_of, empty, ids, xla=case.mode == "xla")
        else:
            self._torch(next_of, empty, ids)
        cache = f"keras-hub's layout, static, {context} positions (written in place)"
        self.settings_ = self.cache_settings(case, cache)
        self.token: Any = None
        self.cache: Any = None

    def _jax(self, lm: Any, next_of: Any, empty: Any, ids: np.ndarray) -> None:
        import jax
        import jax.numpy as jnp

        keras = keras_module()
        variables = list(lm.variables)
        self.values = [v.value for v in variables]

        def first(values: Any, ids: Any) -> Any:
            with keras.StatelessScope(state_mapping=list(zip(variables, values, strict=True))):
                return next_of(ids, empty(), 0)

        def following(values: Any, token: Any, cache: Any, position: Any) -> Any:
            with keras.StatelessScope(state_mapping=list(zip(variables, values, strict=True))):
                return next_of(token[:, None], cache, position)

        self._first = jax.jit(first) if self.compiled else first
        self._following = jax.jit(following, donate_argnums=2) if self.compiled else following
        self.ids = jnp.asarray(ids)
        self.at = [jnp.asarray(p, jnp.int32) for p in range(self.prompt_len + self.new_tokens)]
        self.first = lambda: self._first(self.values, self.ids)
        self.following = lambda position: self._following(
            self.values, self.token, self.cache, self.at[position]
        )
        if not self.loop:
            return
        count, batch = self.new_tokens - 1, ids.shape[0]

        def rest(values: Any, token: Any, cache: Any, start: Any) -> Any:
            def step(i: Any, carry: Any) -> Any:
                token, cache, made = carry
                token, cache = following(values, token, cache, start + i)
                return token, cache, made.at[:, i].set(token)

            made = jnp.zeros((batch, count), jnp.int32)
            return jax.lax.fori_loop(0, count, step, (token, cache, made))[2]

        # The cache is the loop's own carry: nothing returned could reuse it, so no donation.
        self._rest = jax.jit(rest)
        self.rest = lambda: self._rest(
            self.values, self.token, self.cache, self.at[self.prompt_len]
        )

    def _tensorflow(self, next_of: Any, empty: Any, ids: np.ndarray, xla: bool) -> None:
        import tensorflow as tf

        def first(ids: Any) -> Any:
            return next_of(ids, empty(), 0)

        def following(token: Any, cache: Any, position: Any) -> Any:
            return next_of(token[:, None], cache, position)

        self._raw = first, following
        self._first = tf.function(first, jit_compile=xla) if self.compiled else first
        self._following = tf.function(following, jit_compile=xla) if self.compiled else following
        self.ids = tf.constant(ids)
        self.at = [tf.constant(p, tf.int32) for p in range(self.prompt_len + self.new_tokens)]
        self.first = lambda: self._first(self.ids)
        self.following = lambda position: self._following(self.token, self.cache, self.at[position])
        if not self.loop:
            return
        count = self.new_tokens - 1

        def rest(token: Any, cache: Any, start: Any) -> Any:
            def step(i: Any, token: Any, cache: Any, made: Any) -> Any:
                token, cache = following(token, cache, start + i)
                return i + 1, token, cache, made.write(i, token)

            made = tf.TensorArray(tf.int32, size=count)
            found = tf.while_loop(lambda i, *_: i < count, step, (0, token, cache, made))
            return tf.transpose(found[3].stack())

        self._rest = tf.function(rest, jit_compile=xla)
        self.rest = lambda: self._rest(self.token, self.cache, self.at[self.prompt_len])

    def _torch(self, next_of: Any, empty: Any, ids: np.ndarray) -> None:
        import torch

        keras = keras_module()

        def first() -> Any:
            with torch.no_grad():
                return next_of(keras.ops.convert_to_tensor(ids), empty(), 0)

        def following(position: int) -> Any:
            with torch.no_grad():
                return next_of(self.token[:, None], self.cache, position)

        self.first, self.following = first, following

    def prefill(self) -> np.ndarray:
        self.token, self.cache = self.first()
        return np.asarray(keras_module().ops.convert_to_numpy(self.token))

    def decode(self, tokens: np.ndarray, position: int) -> np.ndarray:
        self.token, self.cache = self.following(position)
        return np.asarray(keras_module().ops.convert_to_numpy(self.token))

    def decode_rest(self, tokens: np.ndarray, count: int) -> np.ndarray:
        # The loop was compiled for this case's tokens after the prefill's, from the
        # prefill's token on the device.
        if count != self.new_tokens - 1:
            raise ValueError(f"decode_rest: compiled for {self.new_tokens - 1} tokens, not {count}")
        made = self.rest()
        self.cache = None  # the loop kept its cache to itself: the next prefill starts one
        return np.asarray(keras_module().ops.convert_to_numpy(made))

    def programs(self) -> list[generation.Program]:
        if self.backend != "tensorflow":
            return []  # JAX's programs take the weights; only TensorFlow counts from graphs
        # The last generation's cache where it is kept (none after a compiled loop): no
        # second cache beside it. The Python functions, traced afresh for the count, so
        # the measured tf.functions' trace counts stay the measurement's.
        token, cache = (self.token, self.cache) if self.cache is not None else self.first()
        first, following = self._raw
        return [
            (first, (self.ids,), 1),
            (following, (token, cache, self.at[self.prompt_len]), self.new_tokens - 1),
        ]

    def compiled_texts(self) -> list[str]:
        """On JAX, compiled: the texts of the prefill's, the decoding step's and (with
        decoding=loop) the loop's programs, which say what each op of a profile
        computes (fwbench.explain.hlo); none otherwise."""
        if self.backend != "jax" or not self.compiled:
            return []
        import jax

        # Shapes alone: the cache may be the loop's, kept to itself.
        token, cache = jax.eval_shape(self._first, self.values, self.ids)
        start = self.at[self.prompt_len]
        lowered = [
            self._first.lower(self.values, self.ids),
            self._following.lower(self.values, token, cache, start),
        ]
        if self._rest is not None:
            lowered.append(self._rest.lower(self.values, token, cache, start))
        return [str(program.compile().as_text()) for program in lowered]

    def logits(self, ids: np.ndarray) -> np.ndarray | None:
        return np.asarray(logits_of(self.model, ids))

    def compile_count(self) -> int | None:
        if not self.compiled or self.backend == "torch":
            return None
        programs = [p for p in (self._first, self._following, self._rest) if p is not None]
        if self.backend == "jax":
            return sum(int(p._cache_size()) for p in programs)
        return sum(int(p.experimental_get_tracing_count()) for p in programs)

    def counters(self) -> dict[str, Any]:
        count = self.compile_count()
        name = "jit_compilations" if self.backend == "jax" else "tf_function_traces"
        return ({name: count} if count is not None else {}) | super().counters()
