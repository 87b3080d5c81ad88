"""`generate`: one whole greedy generation, as a streaming server makes it.

A step is a prompt of `seq_len` tokens (the prefill, which yields the first token), then
`new_tokens - 1` decoding steps, each feeding the last token through a key/value cache,
for every sequence of the batch. Each new token is read back to the host as it is made,
as a server streams it, so every token's time is synchronised. Besides the whole step,
the workload times the first token and each decoding step (fwbench.frameworks.generation):
time to first token, time per output token (the mean over the decoding steps, which
verdicts read) and its 50th and 90th percentiles within a generation.
"""

from __future__ import annotations

from typing import Any

from fwbench.tasks import STEP_TIME, Dimension, Figure, Task, causal_lm, register_task

NEW_TOKENS = Dimension(
    "new_tokens",
    "tokens generated after the prompt, greedily (the first from the prefill)",
    default=32,
    # Two at least: the first token comes from the prefill, so one alone times no
    # decoding step, and time per output token would be undefined.
    minimum=2,
    maximum=1 << 16,
    short="new",
)


def _fits(case: Any, spec: Any) -> str | None:
    context = int(spec.context)
    total = case.positions
    prompt = case.prompt_len
    new = total - prompt
    said = (
        f"seq_len {case.dims.get('seq_len')}"
        if case.dims.get("seq_len") is not None
        else f"{prompt} tokens"
    )
    if total > context:
        return (
            f"a prompt of {said} and {new} new tokens need {total} positions; "
            f"{spec.name}'s context holds {context}"
        )
    return None


GENERATE = register_task(
    Task(
        name="generate",
        label="generation",
        description=(
            "a prompt of seq_len tokens, then new_tokens greedy tokens through a key/value "
            "cache, each read back as it is made (streaming)"
        ),
        unit="tokens",
        # Served, a query is a prompt and its answer the generation, streamed: LoadGen
        # times the first token and each later one (fwbench.serve).
        serves=True,
        streams=True,
        figures=(
            Figure(
                "tpot_s",
                "time per output token",
                "TPOT",
                what="the mean of a generation's decoding steps",
            ),
            Figure("ttft_s", "time to first token", "TTFT"),
            Figure("tpot_p50_s", "median decoding step within a generation", "TPOT p50"),
            Figure("tpot_p90_s", "90th-percentile decoding step within a generation", "TPOT p90"),
            STEP_TIME,
        ),
        dimensions=(NEW_TOKENS,),
        units_from=NEW_TOKENS.name,
        positions_from=NEW_TOKENS.name,
        takes=causal_lm,
        fits=_fits,
    )
)
