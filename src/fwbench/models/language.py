"""Language models: BERT-base, GPT-2, the base Transformer, and an LSTM language model in
two implementations (the fused library layer and a generic cell loop). What each is;
each framework's builders are its own (fwbench.models.torch_zoo, keras_zoo)."""

from __future__ import annotations

from fwbench.catalog.models import ModelSpec, Optimizer, register
from fwbench.models import shapes

# Adam at BERT's fine-tuning and the Transformer's learning rates, no warmup schedule:
# the schedule changes nothing a step costs.
register(
    ModelSpec(
        name="bert_base",
        family="language",
        input_kind="tokens",
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
            description=f"2-layer LSTM language model, PTB medium (650 wide): {_what}",
            dims={"seq_len": 35, "vocab_size": 10000},
            objective="lm",
            # Zaremba et al.: plain SGD at learning rate 1 (gradient clipping left out).
            optimizer=Optimizer("sgd", learning_rate=1.0, momentum=0.0),
            workload="lstm_lm",
            implementation=_impl,
        )
    )
