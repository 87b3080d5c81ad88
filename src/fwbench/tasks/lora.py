"""`lora`: one optimizer step of LoRA fine-tuning (low-rank adaptation) of a decoder.

Low-rank adapters on the attention's query and value projections, every other weight
frozen, at rank `lora_rank`: what keras-hub's `backbone.enable_lora(rank)` does, and how
the Keras 3 benchmark fine-tunes Gemma and Mistral. Every framework trains the same
adapters (keras-hub's factorisation, docs/llms.md): the same trainable parameters, the
same causal language-modelling loss and optimizer as `train`.
"""

from __future__ import annotations

from typing import Any

from fwbench.tasks import Dimension, Task, causal_lm, register_task

LORA_RANK = Dimension(
    "lora_rank",
    "the rank of each low-rank adapter (keras-hub's enable_lora(rank))",
    default=4,  # keras-hub's examples' rank, and the Keras 3 benchmark's
    minimum=1,
    maximum=4096,
    short="rank",
)


def _fits(case: Any, spec: Any) -> str | None:
    if getattr(spec, "family", "") != "transformers":
        return (
            "LoRA adapts a transformers decoder that keras-hub reads too (hf:llama, "
            "hf:mistral, hf:gemma, hf:qwen3, ..., or hf:DIR), the same weights in every "
            f"framework; {spec.name} is not one"
            + ("; GPT-2 as one is hf:gpt2 (hf:gpt2@tiny)" if spec.name.startswith("gpt2") else "")
        )
    return None


LORA = register_task(
    Task(
        name="lora",
        label="LoRA fine-tuning",
        description=(
            "one optimizer step training low-rank adapters (rank lora_rank) on the "
            "attention's query and value projections, every other weight frozen"
        ),
        trains=True,
        dimensions=(LORA_RANK,),
        takes=causal_lm,
        fits=_fits,
    )
)
