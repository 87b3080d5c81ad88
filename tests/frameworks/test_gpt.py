"""GPT-2's twins do the same work: given one set of weights (models/gpt_weights.py), the
PyTorch model (transformers' GPT2LMHeadModel) and the Keras one, on TensorFlow and on
JAX, compute the same logits (real frameworks, the test size)."""

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
from fwbench.models import gpt_weights, keras_gpt
seed, seq, vocab = (int(a) for a in sys.argv[1:4])
model = keras_gpt.build("gpt2_tiny", seq_len=seq, vocab_size=vocab)
keras_gpt.load_weights(model, gpt_weights.random_weights("gpt2_tiny", seq, vocab, seed))
ids = np.random.default_rng(1).integers(0, vocab, (2, seq)).astype(np.int32)
print(json.dumps(np.asarray(model(ids, training=False)).tolist()))
"""


def _keras_logits(backend: str, seed: int) -> np.ndarray:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    proc = subprocess.run(
        [sys.executable, "-c", KERAS, str(seed), str(SEQ), str(VOCAB)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return np.array(json.loads(proc.stdout.strip().splitlines()[-1]), dtype=np.float32)


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_gpt2_twins_given_one_set_of_weights_compute_the_same_logits(backend: str) -> None:
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


def test_every_transformers_weight_has_one_keras_weight() -> None:
    shapes = gpt_weights.names("gpt2", 128, 50257)
    mapped = {gpt_weights.keras_name(name) for name in shapes}
    assert len(mapped) == len(shapes) == 2 + 12 * 12 + 2
    assert sum(int(np.prod(s)) for s in shapes.values()) == 124_439_808
    with pytest.raises(KeyError, match=r"lm_head\.weight"):
        gpt_weights.keras_name("lm_head.weight")  # tied: the token embedding
