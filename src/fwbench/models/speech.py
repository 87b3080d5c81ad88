"""Speech models: DeepSpeech2 (convolutions over a spectrogram, bidirectional LSTMs, CTC);
its builders are each framework's (fwbench.models.torch_zoo, keras_zoo)."""

from __future__ import annotations

from fwbench.catalog.models import ModelSpec, Optimizer, register

register(
    ModelSpec(
        name="deepspeech2",
        family="speech",
        input_kind="spectrogram",
        description="DeepSpeech2 (deepspeech.pytorch): 2 conv + 5 bi-LSTM(1024), CTC",
        # 2 s of 10 ms frames of a 161-bin (20 ms window, 16 kHz) spectrogram; 29 characters
        # (blank, space, apostrophe, a-z).
        dims={"seq_len": 200, "freq_bins": 161, "num_classes": 29},
        # Both convolutions need a few bins and frames to leave any output.
        min_dims={"seq_len": 8, "freq_bins": 8, "num_classes": 2},
        objective="ctc",
        optimizer=Optimizer("sgd", learning_rate=3e-4, momentum=0.9),
    )
)
