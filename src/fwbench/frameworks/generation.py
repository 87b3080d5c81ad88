"""What every framework's generation workload shares (task `generate`): the timing of
one generation and the figures it gives, the prompt, and the weights.

A step is one whole greedy generation: the prefill over the prompt yields the first
token, then each decoding step feeds the last token through the key/value cache. Every
token is brought to the host as it is made (a streaming server sends it), so each
token's time is its own, synchronised: the first token's time is the time to first
token (TTFT), each later one a decoding step's time per output token (TPOT). A framework
implements `prefill` and `decode` in its idiomatic fast path; this class times them.

Framework-free: the prompt and the weights are NumPy arrays made from fixed seeds, so
that every framework generates from the same prompt with the same weights, and its
greedy tokens can be compared (`tokens`, recorded with the result).
"""

from __future__ import annotations

import statistics
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np

from fwbench.case import Case
from fwbench.catalog.inputs import parse_signature
from fwbench.explain.timeline import DECODE, PREFILL
from fwbench.frameworks.base import TaskNotImplemented, Workload
from fwbench.models import gpt_weights, shapes
from fwbench.tasks.generate import NEW_TOKENS

PROMPT_SEED = 1234
WEIGHTS_SEED = 0


def prompt(case: Case) -> np.ndarray:
    """The prompt's token ids, (batch, prompt length) int32: the same in every framework.
    A user's model's prompt is its first input's (B x sequence ids below its bound)."""
    rng = np.random.default_rng(PROMPT_SEED)
    shape = (case.batch_size, case.prompt_len)
    if case.inputs is not None:
        first = parse_signature(case.inputs)[0]
        return rng.integers(0, first.value_high(), shape, dtype=np.int32)
    return rng.integers(0, case.dim("vocab_size"), shape, dtype=np.int32)


def weights(case: Case) -> dict[str, np.ndarray]:
    """The model's weights, the same in every framework (fwbench.models.gpt_weights)."""
    return gpt_weights.random_weights(
        case.model, case.dim("seq_len"), case.dim("vocab_size"), WEIGHTS_SEED
    )


@contextmanager
def phases_marked(
    workload: Workload, mark: Callable[[str], AbstractContextManager[Any]]
) -> Iterator[None]:
    """Inside: a generation's prefill and decoding steps each run in a profiler range
    `mark(name)` (GenerateWorkload.mark_phase); other workloads have no phases."""
    if not isinstance(workload, GenerateWorkload):
        yield
        return
    workload.mark_phase = mark
    try:
        yield
    finally:
        workload.mark_phase = None


def new_tokens(case: Case) -> int:
    return case.task_values[NEW_TOKENS.name]


def cache_bytes(case: Case) -> int | None:
    """The key/value cache of a whole generation: keys and values of every layer, for
    every position of the prompt and the new tokens, in the case's precision (a static
    cache holds this from the start; a dynamic one grows to it). None for a model whose
    sizes fwbench does not hold (a user's)."""
    size = shapes.GPT2.get(case.model)
    if size is None:
        return None
    positions = case.dim("seq_len") + new_tokens(case)
    per_value = 2 if case.precision in ("bf16", "fp16") else 4
    return 2 * size["layers"] * case.batch_size * positions * size["width"] * per_value


def token_margins(steps: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """At each step (a row of logits, from the position before the token), the made
    token's logit less the highest of the others, as a share of the row's root mean
    square: the top two's gap where the token was the row's argmax, negative where it
    was not."""
    rows = np.asarray(steps, dtype=np.float64)
    made = rows[np.arange(len(tokens)), tokens]
    others = rows.copy()
    others[np.arange(len(tokens)), tokens] = -np.inf
    scale = np.sqrt(np.mean(rows**2, axis=-1))
    found: np.ndarray = (made - others.max(axis=-1)) / np.maximum(scale, 1e-30)
    return found


# A compiled call (a tf.function), arguments of the shapes it is called with, and how many
# times one generation calls it.
Program = tuple[Any, tuple[Any, ...], int]


class GenerateWorkload(Workload):
    """One greedy generation per step, timed token by token (see the module's docstring).

    `prefill` and `decode` return the next token of every sequence as a NumPy array
    (batch,): bringing it to the host is the synchronisation a streaming server has."""

    # While `fwbench explain` profiles, the adapter sets it to its profiler's range (called
    # with PREFILL or DECODE): each prefill and decoding step runs inside one, and the
    # breakdown splits the profile by them. None otherwise: timed steps call prefill and
    # decode directly, with nothing around them.
    mark_phase: Callable[[str], AbstractContextManager[Any]] | None = None
    # Whether it runs `--options decoding=loop` (decode_rest: every decoding step in one
    # compiled loop); a generation that cannot is refused such a case.
    LOOPS = False

    def __init__(self, case: Case, clock: Callable[[], float] = time.perf_counter) -> None:
        self.loop = case.option_values.get("decoding") == "loop"
        if self.loop and not self.LOOPS:
            raise TaskNotImplemented(
                f"options: decoding=loop: {case.model} in {case.framework} decodes one "
                "step a call; keras-hub's decoders in a compiled mode run the loop"
            )
        self.new_tokens = new_tokens(case)
        self.prompt_len = case.prompt_len
        # Where its profile's kernels run (a profiler reads the GPU's plane, not the host's).
        self.on_gpu = case.device == "cuda"
        self.clock = clock
        self.last_tokens: np.ndarray | None = None  # (batch, new_tokens) of the last step
        self.prompt_ids = prompt(case)
        self.settings_: dict[str, Any] = {}  # the adapter adds the case's settings
        self._ttft: list[float] = []
        self._tpot: list[float] = []
        self._p50: list[float] = []
        self._p90: list[float] = []

    @abstractmethod
    def prefill(self) -> np.ndarray:
        """Start a generation: run the prompt, fill the cache, return the first tokens."""

    @abstractmethod
    def decode(self, tokens: np.ndarray, position: int) -> np.ndarray:
        """Feed `tokens` (batch,) at `position` through the cache; return the next ones.
        `tokens` is the host's copy of what the last call returned: an implementation may
        feed the device's copy it kept instead (the same values, no upload)."""

    def decode_rest(self, tokens: np.ndarray, count: int) -> np.ndarray:
        """The `count` tokens after `tokens` (the prefill's), every decoding step in one
        compiled loop, read back at its end: (batch, count). Where LOOPS."""
        raise NotImplementedError

    def programs(self) -> list[Program]:
        """The calls one generation makes, each with arguments of their shapes and how
        many times it runs (the prefill once, the decoding step for each token after the
        first): TensorFlow counts a generation's FLOPs from their graphs. Empty where a
        framework counts no FLOPs from programs."""
        return []

    def logits(self, ids: np.ndarray) -> np.ndarray | None:
        """The model's logits at every position of `ids` (1, length), in one forward pass
        without a cache, at the case's precision, as float32 (1, length, vocabulary):
        read once, untimed, after the measurement (`generated`). None where the
        framework does not give them."""
        return None

    def step(self) -> None:
        clock = self.clock
        prefill, decode = self._phases()
        start = clock()
        token = prefill()
        first = clock()
        begun = first
        if self.first_output is not None:
            self.first_output()
            begun = clock()  # LoadGen's answer to the first token is no decoding step's
        made = [token]
        if self.loop:
            # One call for every decoding step: no step of its own is timed, so time per
            # output token is the loop's time over its steps, and p50 and p90 are unknown.
            rest = self.decode_rest(token, self.new_tokens - 1)
            self._ttft.append(first - start)
            self._tpot.append((clock() - begun) / (self.new_tokens - 1))
            self.last_tokens = np.concatenate([token[:, None], rest], axis=1)
            return
        times = []
        for i in range(1, self.new_tokens):
            before = clock()
            token = decode(token, self.prompt_len + i - 1)
            times.append(clock() - before)
            made.append(token)
        self._ttft.append(first - start)
        self._tpot.append(statistics.fmean(times))
        self._p50.append(float(np.quantile(times, 0.5)))
        self._p90.append(float(np.quantile(times, 0.9)))
        self.last_tokens = np.stack(made, axis=1)

    def _phases(
        self,
    ) -> tuple[Callable[[], np.ndarray], Callable[[np.ndarray, int], np.ndarray]]:
        """prefill and decode, each inside its phase's range when mark_phase is set."""
        mark = self.mark_phase
        if mark is None:
            return self.prefill, self.decode

        def prefill() -> np.ndarray:
            with mark(PREFILL):
                return self.prefill()

        def decode(tokens: np.ndarray, position: int) -> np.ndarray:
            with mark(DECODE):
                return self.decode(tokens, position)

        return prefill, decode

    def sync(self) -> None:
        # Each token was brought to the host as it was made: nothing is pending.
        return None

    def figures(self) -> dict[str, float]:
        found = {
            "ttft_s": self._ttft,
            "tpot_s": self._tpot,
            "tpot_p50_s": self._p50,
            "tpot_p90_s": self._p90,
        }
        out = {name: statistics.fmean(values) for name, values in found.items() if values}
        for values in found.values():
            values.clear()
        return out

    def counters(self) -> dict[str, Any]:
        return self.generated()

    def settings(self) -> dict[str, Any]:
        return self.settings_

    def cache_settings(self, case: Case, kind: str) -> dict[str, Any]:
        """What a result records of its cache and decoding (its settings)."""
        read = (
            "the decoding steps one compiled loop, its tokens read back at its end"
            if self.loop
            else "each token read back to the host"
        )
        return {
            "kv_cache": kind,
            "kv_cache_bytes": cache_bytes(case),
            "decoding": f"greedy (argmax), {read}",
        }

    def generated(self) -> dict[str, Any]:
        """What the last generation made, recorded with the result: the first sequence's
        tokens, which every framework given the same weights and prompt must repeat, and
        how close each was to a tie (`token_margins`): the made token's logit less the
        highest other one, as a share of the logits' root mean square, from one forward
        pass over the prompt and the tokens made, after the measurement. Where the
        decoding chose its forward pass's argmax, that is the gap between the top two;
        it is negative where the decoding chose another token, which a cache that holds
        something else would. Two frameworks that part where every gap is within their
        numerics' error made the same model's choice (models.parity.token_check)."""
        if self.last_tokens is None:
            return {}
        tokens = self.last_tokens[0]
        found: dict[str, Any] = {"generated_tokens": [int(t) for t in tokens]}
        ids = np.concatenate([self.prompt_ids[0], tokens[:-1]])[None, :].astype(np.int32)
        scores = self.logits(ids)
        if scores is not None:
            made = token_margins(scores[0, self.prompt_len - 1 :], tokens)
            found["token_margins"] = [round(float(m), 6) for m in made]
        return found
