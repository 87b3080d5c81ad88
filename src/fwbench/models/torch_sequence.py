"""PyTorch implementations of the language and speech models (imported in workers only).

Each mirrors its Keras twin in keras_sequence.py layer for layer, so parameter counts and
FLOPs agree; every model returns logits.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from fwbench.models import shapes


class Bert(nn.Module):
    """transformers' BertForSequenceClassification, from a config: no download."""

    def __init__(self, seq_len: int, vocab_size: int, num_classes: int) -> None:
        super().__init__()
        from transformers import BertConfig, BertForSequenceClassification

        config = BertConfig(
            vocab_size=vocab_size,
            max_position_embeddings=max(shapes.BERT_POSITIONS, seq_len),
            **shapes.BERT_BASE,
        )
        config.num_labels = num_classes
        self.bert = BertForSequenceClassification(config)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.bert(input_ids=ids).logits
        return out


def _sinusoid(length: int, width: int) -> torch.Tensor:
    position = torch.arange(length, dtype=torch.float32)[:, None]
    rate = torch.exp(torch.arange(0, width, 2, dtype=torch.float32) * (-math.log(1e4) / width))
    table = torch.zeros(length, width)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)
    return table


class Transformer(nn.Module):
    """The base Transformer (Vaswani et al.): translation with teacher forcing."""

    def __init__(self, seq_len: int, vocab_size: int) -> None:
        super().__init__()
        d = shapes.TRANSFORMER_BASE["d_model"]
        self.scale = math.sqrt(d)
        self.src_embed = nn.Embedding(vocab_size, d)
        self.tgt_embed = nn.Embedding(vocab_size, d)
        self.register_buffer("position", _sinusoid(seq_len, d), persistent=False)
        self.dropout = nn.Dropout(shapes.DROPOUT)
        self.core = nn.Transformer(
            d_model=d,
            nhead=shapes.TRANSFORMER_BASE["heads"],
            num_encoder_layers=shapes.TRANSFORMER_BASE["layers"],
            num_decoder_layers=shapes.TRANSFORMER_BASE["layers"],
            dim_feedforward=shapes.TRANSFORMER_BASE["d_ff"],
            dropout=shapes.DROPOUT,
            batch_first=True,
        )
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(seq_len), persistent=False
        )
        self.out = nn.Linear(d, vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        s = self.dropout(self.src_embed(src) * self.scale + self.position)
        t = self.dropout(self.tgt_embed(tgt) * self.scale + self.position)
        h = self.core(s, t, tgt_mask=self.causal, tgt_is_causal=True)
        out: torch.Tensor = self.out(h)
        return out


class CellLSTM(nn.Module):
    """A multi-layer LSTM stepped in Python, one nn.LSTMCell call per layer and step: the
    generic cell loop, with the same weights as nn.LSTM."""

    def __init__(self, input_size: int, hidden: int, layers: int, dropout: float) -> None:
        super().__init__()
        sizes = [input_size] + [hidden] * (layers - 1)
        self.cells = nn.ModuleList(nn.LSTMCell(i, hidden) for i in sizes)
        self.dropout = nn.Dropout(dropout)
        self.hidden = hidden

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, time, features)
        for i, cell in enumerate(self.cells):
            if i:
                x = self.dropout(x)
            h = x.new_zeros(x.shape[0], self.hidden)
            c = x.new_zeros(x.shape[0], self.hidden)
            outputs = []
            for t in range(x.shape[1]):
                h, c = cell(x[:, t], (h, c))
                outputs.append(h)
            x = torch.stack(outputs, dim=1)
        return x


class LstmLM(nn.Module):
    """Word-level LSTM language model (Zaremba et al., PTB medium)."""

    def __init__(self, vocab_size: int, fused: bool) -> None:
        super().__init__()
        width, layers = shapes.LSTM_LM["hidden"], shapes.LSTM_LM["layers"]
        self.embed = nn.Embedding(vocab_size, width)
        self.dropout = nn.Dropout(shapes.LSTM_LM_DROPOUT)
        self.rnn: nn.Module
        if fused:
            self.rnn = nn.LSTM(
                width, width, layers, batch_first=True, dropout=shapes.LSTM_LM_DROPOUT
            )
        else:
            self.rnn = CellLSTM(width, width, layers, shapes.LSTM_LM_DROPOUT)
        self.fused = fused
        self.out = nn.Linear(width, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.embed(ids))
        x = self.rnn(x)[0] if self.fused else self.rnn(x)
        out: torch.Tensor = self.out(self.dropout(x))
        return out


class DeepSpeech2(nn.Module):
    """DeepSpeech2 as in deepspeech.pytorch: two 2-D convolutions over (frequency, time),
    bidirectional LSTMs whose two directions are summed, and a per-frame classifier."""

    def __init__(self, freq_bins: int, num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        channels = 1
        for spec in shapes.DS2_CONVS:
            layers += [
                nn.Conv2d(
                    channels,
                    spec["filters"],
                    spec["kernel"],
                    stride=spec["stride"],
                    padding=spec["padding"],
                    bias=False,
                ),
                nn.BatchNorm2d(spec["filters"], eps=shapes.BN_EPS, momentum=0.01),
                nn.ReLU(),
            ]
            channels = spec["filters"]
        self.conv = nn.Sequential(*layers)
        features = channels * shapes.ds2_freq_out(freq_bins)
        hidden = shapes.DS2_RNN["hidden"]
        self.rnns = nn.ModuleList(
            nn.LSTM(features if i == 0 else hidden, hidden, batch_first=True, bidirectional=True)
            for i in range(shapes.DS2_RNN["layers"])
        )
        self.hidden = hidden
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, time, freq)
        x = self.conv(x.transpose(1, 2).unsqueeze(1))  # (batch, channels, freq', time')
        b, c, f, t = x.shape
        x = x.permute(0, 3, 1, 2).reshape(b, t, c * f)
        for rnn in self.rnns:
            x = rnn(x)[0].view(b, t, 2, self.hidden).sum(2)
        out: torch.Tensor = self.fc(x)
        return out


def build(name: str, **dims: Any) -> nn.Module:
    if name == "bert_base":
        return Bert(dims["seq_len"], dims["vocab_size"], dims["num_classes"])
    if name == "transformer_base":
        return Transformer(dims["seq_len"], dims["vocab_size"])
    if name in ("lstm_lm", "lstm_lm_cell"):
        return LstmLM(dims["vocab_size"], fused=name == "lstm_lm")
    if name == "deepspeech2":
        return DeepSpeech2(dims["freq_bins"], dims["num_classes"])
    raise KeyError(name)
