"""Hyper-parameters the PyTorch and Keras twins of each sequence model share.

Kept apart from both implementations (and free of framework imports) so the two cannot
drift: each reads its sizes from here.
"""

from __future__ import annotations

from typing import Any

DROPOUT = 0.1
BN_EPS = 1e-5
LN_EPS_BERT = 1e-12
LN_EPS = 1e-5

# BERT-base (Devlin et al.): 12 layers, 768 wide, 12 heads, 3072 feed-forward, GELU.
BERT_BASE: dict[str, Any] = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "hidden_dropout_prob": DROPOUT,
    "attention_probs_dropout_prob": DROPOUT,
    "type_vocab_size": 2,
    "layer_norm_eps": LN_EPS_BERT,
}
BERT_POSITIONS = 512

# Transformer base (Vaswani et al.): 6 + 6 layers, 512 wide, 8 heads, 2048 feed-forward.
TRANSFORMER_BASE: dict[str, int] = {"d_model": 512, "heads": 8, "layers": 6, "d_ff": 2048}

# GPT-2 (Radford et al. 2019) small: 12 layers, 768 wide, 12 heads, a 1024-token context,
# 4x feed-forward, tied input/output embeddings; the tiny one for tests. Dropout 0.1 on
# embeddings, residuals and attention weights; layer norm epsilon 1e-5 (LN_EPS).
GPT2: dict[str, dict[str, int]] = {
    "gpt2": {"layers": 12, "width": 768, "heads": 12, "positions": 1024},
    "gpt2_tiny": {"layers": 2, "width": 64, "heads": 2, "positions": 128},
}

# Word-level LSTM LM, PTB "medium" (Zaremba et al.): 2 layers of 650, dropout 0.5.
LSTM_LM: dict[str, int] = {"hidden": 650, "layers": 2}
LSTM_LM_DROPOUT = 0.5

# DeepSpeech2 as in deepspeech.pytorch: kernels and strides over (frequency, time).
DS2_CONVS: list[dict[str, Any]] = [
    {"filters": 32, "kernel": (41, 11), "stride": (2, 2), "padding": (20, 5)},
    {"filters": 32, "kernel": (21, 11), "stride": (2, 1), "padding": (10, 5)},
]
DS2_RNN: dict[str, int] = {"hidden": 1024, "layers": 5}


def _conv_out(size: int, kernel: int, stride: int, padding: int) -> int:
    return (size + 2 * padding - kernel) // stride + 1


def ds2_freq_out(freq_bins: int) -> int:
    for spec in DS2_CONVS:
        freq_bins = _conv_out(freq_bins, spec["kernel"][0], spec["stride"][0], spec["padding"][0])
    return freq_bins


def ds2_frames_out(frames: int) -> int:
    for spec in DS2_CONVS:
        frames = _conv_out(frames, spec["kernel"][1], spec["stride"][1], spec["padding"][1])
    return frames
