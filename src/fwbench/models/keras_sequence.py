"""Keras 3 implementations of the language and speech models (imported in workers only).

Written layer for layer after their PyTorch twins in torch_sequence.py, with the sizes of
shapes.py. keras-hub's BertBackbone is not used: keras-hub requires tensorflow-text,
which installs the full `tensorflow` wheel beside `tensorflow-cpu`.
"""

from __future__ import annotations

import math
from typing import Any

import keras
import numpy as np
from keras import layers, ops

from fwbench.models import shapes


class BertEmbeddings(layers.Layer):  # type: ignore[misc]
    """Word + position + token-type embeddings (type 0 everywhere), layer norm, dropout."""

    def __init__(self, vocab_size: int, width: int, positions: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.word = layers.Embedding(vocab_size, width, name="word")
        self.position = layers.Embedding(positions, width, name="position")
        self.token_type = layers.Embedding(shapes.BERT_BASE["type_vocab_size"], width, name="type")
        self.norm = layers.LayerNormalization(epsilon=shapes.LN_EPS_BERT)
        self.dropout = layers.Dropout(shapes.DROPOUT)

    def call(self, ids: Any, training: bool | None = None) -> Any:
        seq_len = ops.shape(ids)[1]
        x = self.word(ids) + self.position(ops.arange(seq_len)[None, :])
        x = x + self.token_type(ops.zeros_like(ids))
        return self.dropout(self.norm(x), training=training)


def _post_norm_block(x: Any, sublayer: Any, eps: float) -> Any:
    return layers.LayerNormalization(epsilon=eps)(x + layers.Dropout(shapes.DROPOUT)(sublayer))


def _feed_forward(x: Any, width: int, inner: int, activation: str) -> Any:
    h = layers.Dense(inner, activation=activation)(x)
    if activation == "relu":  # torch's TransformerEncoderLayer drops out inside the block
        h = layers.Dropout(shapes.DROPOUT)(h)
    return layers.Dense(width)(h)


def bert(seq_len: int, vocab_size: int, num_classes: int) -> keras.Model:
    cfg = shapes.BERT_BASE
    width, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    ids = keras.Input((seq_len,), dtype="int32", name="input_ids")
    positions = max(shapes.BERT_POSITIONS, seq_len)
    x = BertEmbeddings(vocab_size, width, positions, name="embeddings")(ids)
    for _ in range(cfg["num_hidden_layers"]):
        attn = layers.MultiHeadAttention(heads, width // heads, dropout=shapes.DROPOUT)(x, x)
        x = _post_norm_block(x, attn, shapes.LN_EPS_BERT)
        ff = _feed_forward(x, width, cfg["intermediate_size"], "gelu")
        x = _post_norm_block(x, ff, shapes.LN_EPS_BERT)
    pooled = layers.Dense(width, activation="tanh", name="pooler")(x[:, 0])
    logits = layers.Dense(num_classes, name="classifier")(layers.Dropout(shapes.DROPOUT)(pooled))
    return keras.Model(ids, logits, name="bert_base")


def _sinusoid(length: int, width: int) -> np.ndarray:
    position = np.arange(length, dtype=np.float32)[:, None]
    rate = np.exp(np.arange(0, width, 2, dtype=np.float32) * (-math.log(1e4) / width))
    table = np.zeros((length, width), dtype=np.float32)
    table[:, 0::2] = np.sin(position * rate)
    table[:, 1::2] = np.cos(position * rate)
    return table


def transformer(seq_len: int, vocab_size: int) -> keras.Model:
    cfg = shapes.TRANSFORMER_BASE
    d, heads, d_ff = cfg["d_model"], cfg["heads"], cfg["d_ff"]
    src = keras.Input((seq_len,), dtype="int32", name="source")
    tgt = keras.Input((seq_len,), dtype="int32", name="target")
    position = ops.convert_to_tensor(_sinusoid(seq_len, d))

    def embed(ids: Any, name: str) -> Any:
        x = layers.Embedding(vocab_size, d, name=name)(ids) * math.sqrt(d) + position
        return layers.Dropout(shapes.DROPOUT)(x)

    def attention(q: Any, kv: Any, causal: bool = False) -> Any:
        mha = layers.MultiHeadAttention(heads, d // heads, dropout=shapes.DROPOUT)
        return mha(q, kv, use_causal_mask=causal)

    memory = embed(src, "source_embedding")
    for _ in range(cfg["layers"]):
        memory = _post_norm_block(memory, attention(memory, memory), shapes.LN_EPS)
        memory = _post_norm_block(memory, _feed_forward(memory, d, d_ff, "relu"), shapes.LN_EPS)
    memory = layers.LayerNormalization(epsilon=shapes.LN_EPS)(memory)
    x = embed(tgt, "target_embedding")
    for _ in range(cfg["layers"]):
        x = _post_norm_block(x, attention(x, x, causal=True), shapes.LN_EPS)
        x = _post_norm_block(x, attention(x, memory), shapes.LN_EPS)
        x = _post_norm_block(x, _feed_forward(x, d, d_ff, "relu"), shapes.LN_EPS)
    x = layers.LayerNormalization(epsilon=shapes.LN_EPS)(x)
    logits = layers.Dense(vocab_size, name="output")(x)
    return keras.Model([src, tgt], logits, name="transformer_base")


def lstm_lm(seq_len: int, vocab_size: int, fused: bool) -> keras.Model:
    width, depth = shapes.LSTM_LM["hidden"], shapes.LSTM_LM["layers"]
    ids = keras.Input((seq_len,), dtype="int32", name="tokens")
    x = layers.Embedding(vocab_size, width)(ids)
    for _ in range(depth):
        x = layers.Dropout(shapes.LSTM_LM_DROPOUT)(x)
        if fused:  # Keras' LSTM layer: cuDNN's fused kernel on GPUs
            x = layers.LSTM(width, return_sequences=True)(x)
        else:  # the generic recurrent loop over a cell
            x = layers.RNN(layers.LSTMCell(width), return_sequences=True)(x)
    x = layers.Dropout(shapes.LSTM_LM_DROPOUT)(x)
    logits = layers.Dense(vocab_size)(x)
    return keras.Model(ids, logits, name="lstm_lm" if fused else "lstm_lm_cell")


def deepspeech2(seq_len: int, freq_bins: int, num_classes: int) -> keras.Model:
    spectrogram = keras.Input((seq_len, freq_bins), name="spectrogram")
    x = layers.Permute((2, 1))(spectrogram)  # (freq, time), as the PyTorch twin convolves
    x = layers.Reshape((freq_bins, seq_len, 1))(x)
    for spec in shapes.DS2_CONVS:
        x = layers.ZeroPadding2D(spec["padding"])(x)  # torch's symmetric padding exactly
        x = layers.Conv2D(spec["filters"], spec["kernel"], strides=spec["stride"], use_bias=False)(
            x
        )
        # Keras' momentum is the old statistics' weight: 1 - torch's 0.01.
        x = layers.BatchNormalization(epsilon=shapes.BN_EPS, momentum=0.99)(x)
        x = layers.ReLU()(x)
    freq, frames = shapes.ds2_freq_out(freq_bins), shapes.ds2_frames_out(seq_len)
    channels = shapes.DS2_CONVS[-1]["filters"]
    x = layers.Permute((2, 1, 3))(x)  # (time', freq', channels)
    x = layers.Reshape((frames, freq * channels))(x)
    for _ in range(shapes.DS2_RNN["layers"]):
        lstm = layers.LSTM(shapes.DS2_RNN["hidden"], return_sequences=True)
        x = layers.Bidirectional(lstm, merge_mode="sum")(x)
    logits = layers.Dense(num_classes)(x)
    return keras.Model(spectrogram, logits, name="deepspeech2")


def build(name: str, **dims: Any) -> keras.Model:
    if name == "bert_base":
        return bert(dims["seq_len"], dims["vocab_size"], dims["num_classes"])
    if name == "transformer_base":
        return transformer(dims["seq_len"], dims["vocab_size"])
    if name in ("lstm_lm", "lstm_lm_cell"):
        return lstm_lm(dims["seq_len"], dims["vocab_size"], fused=name == "lstm_lm")
    if name == "deepspeech2":
        return deepspeech2(dims["seq_len"], dims["freq_bins"], dims["num_classes"])
    raise KeyError(name)
