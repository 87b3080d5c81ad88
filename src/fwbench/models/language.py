"""Language models: BERT-base, GPT-2, the base Transformer, and an LSTM language model in
two implementations (the fused library layer and a generic cell loop)."""

from __future__ import annotations

import importlib
from typing import Any

from fwbench.catalog.models import ModelSpec, Optimizer, register
from fwbench.models import shapes


def builders(
    name: str, torch_module: str = "torch_sequence", keras_module: str = "keras_sequence"
) -> dict[str, Any]:
    """Builders of a model whose twins live in a PyTorch and a Keras module of
    fwbench.models (imported in the worker, when the model is built)."""

    def torch_build(**dims: int) -> Any:
        return importlib.import_module(f"fwbench.models.{torch_module}").build(name, **dims)

    def keras_build(**dims: int) -> Any:
        return importlib.import_module(f"fwbench.models.{keras_module}").build(name, **dims)

    return {"torch": torch_build, "tensorflow": keras_build}


# Adam at BERT's fine-tuning and the Transformer's learning rates, no warmup schedule:
# the schedule changes nothing a step costs.
register(
    ModelSpec(
        name="bert_base",
        family="language",
        input_kind="tokens",
        builders=builders("bert_base"),
        description="BERT-base encoder + classification head (transformers on PyTorch)",
        dims={"seq_len": 128, "vocab_size": 30522, "num_classes": 2},
        # Positions beyond BERT's 512 get an extended table; the model stays BERT-base.
        min_dims={"seq_len": 1},
        objective="classify",
        optimizer=Optimizer("adam", learning_rate=2e-5),
    )
)
# GPT-2 trains with AdamW (weight decay 0.1 and learning rate 6e-4 as nanoGPT's GPT-2
# small; betas and epsilon as every Adam here); its vocabulary is GPT-2's BPE's.
for _name, _what, _seq in (
    ("gpt2", "GPT-2 small decoder (12 layers, 768 wide; transformers on PyTorch)", 128),
    ("gpt2_tiny", "GPT-2 at test size (2 layers, 64 wide)", 32),
):
    register(
        ModelSpec(
            name=_name,
            family="language",
            input_kind="tokens",
            builders=builders(_name, "torch_gpt", "keras_gpt"),
            description=_what,
            dims={"seq_len": _seq, "vocab_size": 50257 if _name == "gpt2" else 512},
            objective="lm",
            optimizer=Optimizer("adamw", learning_rate=6e-4, weight_decay=0.1),
            context=shapes.GPT2[_name]["positions"],
        )
    )
register(
    ModelSpec(
        name="transformer_base",
        family="language",
        input_kind="token_pair",
        builders=builders("transformer_base"),
        description="Transformer base encoder-decoder, teacher forcing (6+6 layers, 512 wide)",
        dims={"seq_len": 64, "vocab_size": 32000},
        objective="lm",
        optimizer=Optimizer("adam", learning_rate=1e-4),
    )
)
for _name, _impl, _what in (
    ("lstm_lm", "", "fused LSTM layer (nn.LSTM / keras LSTM)"),
    ("lstm_lm_cell", "cell", "generic cell loop (nn.LSTMCell / keras RNN(LSTMCell))"),
):
    register(
        ModelSpec(
            name=_name,
            family="language",
            input_kind="tokens",
            builders=builders(_name),
            description=f"2-layer LSTM language model, PTB medium (650 wide): {_what}",
            dims={"seq_len": 35, "vocab_size": 10000},
            objective="lm",
            # Zaremba et al.: plain SGD at learning rate 1 (gradient clipping left out).
            optimizer=Optimizer("sgd", learning_rate=1.0, momentum=0.0),
            workload="lstm_lm",
            implementation=_impl,
        )
    )
