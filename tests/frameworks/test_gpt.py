"""The zoo's GPT-2 does the same work in every framework: given one set of weights
(models/gpt_weights.py), the PyTorch model (transformers' GPT2LMHeadModel) and the Keras
one (keras-hub's GPT2CausalLM at the zoo's dimensions), on TensorFlow, JAX and PyTorch,
compute the same logits (real frameworks, the test size)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fwbench.models import gpt_weights

SEQ, VOCAB = 16, 512


def _ids() -> np.ndarray:
    return np.random.default_rng(1).integers(0, VOCAB, (2, SEQ)).astype(np.int32)


def _torch_logits(seed: int) -> np.ndarray:
    import torch

    from fwbench.models import torch_gpt

    model = torch_gpt.build("gpt2_tiny", seq_len=SEQ, vocab_size=VOCAB).eval()
    torch_gpt.load_weights(model, gpt_weights.random_weights("gpt2_tiny", SEQ, VOCAB, seed))
    with torch.inference_mode():
        return model(torch.from_numpy(_ids()).long()).numpy()


KERAS = """
import json, sys
import numpy as np
from fwbench.models import gpt_weights, keras_hub_lm
seed, seq, vocab = (int(a) for a in sys.argv[1:4])
model = keras_hub_lm.build("gpt2_tiny", seq_len=seq, vocab_size=vocab)
weights = gpt_weights.random_weights("gpt2_tiny", seq, vocab, seed)
if len(sys.argv) > 4:  # a weight of another model besides
    weights[sys.argv[4]] = np.zeros(1, np.float32)
keras_hub_lm.load_gpt2_weights(model, weights)
ids = np.random.default_rng(1).integers(0, vocab, (2, seq)).astype(np.int32)
import keras
print(json.dumps(keras.ops.convert_to_numpy(model(ids, training=False)).tolist()))
"""


def _keras(backend: str, seed: int, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    return subprocess.run(
        [sys.executable, "-c", KERAS, str(seed), str(SEQ), str(VOCAB), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _keras_logits(backend: str, seed: int) -> np.ndarray:
    proc = _keras(backend, seed)
    assert proc.returncode == 0, proc.stderr
    return np.array(json.loads(proc.stdout.strip().splitlines()[-1]), dtype=np.float32)


@pytest.mark.parametrize("backend", ["tensorflow", "jax", "torch"])
def test_gpt2_in_every_framework_given_one_set_of_weights_compute_the_same_logits(
    backend: str,
) -> None:
    expected = _torch_logits(seed=0)
    found = _keras_logits(backend, seed=0)
    assert found.shape == expected.shape == (2, SEQ, VOCAB)
    scale = float(np.abs(expected).max())
    assert np.abs(found - expected).max() <= 1e-4 * scale, backend
    # The next token each position would pick (what greedy decoding takes) agrees.
    assert (found.argmax(-1) == expected.argmax(-1)).all()
    # Other weights give other logits: the check can fail.
    other = _keras_logits(backend, seed=1)
    assert np.abs(other - expected).max() > 100 * 1e-4 * scale


def test_weights_the_keras_model_has_no_place_for_are_refused() -> None:
    """Every transformers weight is read: one more (a weight of another model) is named."""
    proc = _keras("jax", 0, "transformer.h.9.ln_1.weight")
    assert proc.returncode != 0
    assert "no place for: transformer.h.9.ln_1.weight" in proc.stderr


def test_the_weights_are_gpt2_smalls() -> None:
    shapes = gpt_weights.names("gpt2", 128, 50257)
    assert len(shapes) == 2 + 12 * 12 + 2  # no lm_head: tied to the token embedding
    assert sum(int(np.prod(s)) for s in shapes.values()) == 124_439_808
