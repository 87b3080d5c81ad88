"""One set of GPT-2 weights for every framework, so that their outputs can be compared.

The weights are made here, in NumPy, under the names transformers' GPT2LMHeadModel gives
them (its `state_dict()` keys, `transformer.h.0.attn.c_attn.weight`, ...), with GPT-2's
initialisation (normal, standard deviation 0.02; biases zero; layer norms one and zero).
PyTorch loads them as its state dict (torch_gpt.py), the Keras backends through
keras-hub's own GPT-2 converter (keras_hub_lm.py), Flax by its own map (flax_gpt.py).
The output layer is the token embedding (tied): it has no weights of its own.

Framework-free: a worker of any framework makes the same arrays from the same seed.
"""

from __future__ import annotations

import numpy as np

from fwbench.models import shapes

INIT_STD = 0.02  # GPT-2's initializer_range


def names(name: str, seq_len: int, vocab_size: int) -> dict[str, tuple[int, ...]]:
    """Every weight of the model `name` (a key of shapes.GPT2) by its transformers name,
    with its shape."""
    size = shapes.GPT2[name]
    width, positions = size["width"], max(size["positions"], seq_len)
    found: dict[str, tuple[int, ...]] = {
        "transformer.wte.weight": (vocab_size, width),
        "transformer.wpe.weight": (positions, width),
    }
    for i in range(size["layers"]):
        h = f"transformer.h.{i}"
        for norm in ("ln_1", "ln_2"):
            found[f"{h}.{norm}.weight"] = (width,)
            found[f"{h}.{norm}.bias"] = (width,)
        for proj, (n_in, n_out) in {
            "attn.c_attn": (width, 3 * width),
            "attn.c_proj": (width, width),
            "mlp.c_fc": (width, 4 * width),
            "mlp.c_proj": (4 * width, width),
        }.items():
            found[f"{h}.{proj}.weight"] = (n_in, n_out)
            found[f"{h}.{proj}.bias"] = (n_out,)
    found["transformer.ln_f.weight"] = (width,)
    found["transformer.ln_f.bias"] = (width,)
    return found


def random_weights(
    name: str, seq_len: int, vocab_size: int, seed: int = 0
) -> dict[str, np.ndarray]:
    """The weights, float32, the same for a given seed on any machine."""
    rng = np.random.default_rng(seed)
    weights = {}
    for key, shape in names(name, seq_len, vocab_size).items():
        if key.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            weights[key] = np.ones(shape, dtype=np.float32)
        elif key.endswith(".bias"):
            weights[key] = np.zeros(shape, dtype=np.float32)
        else:
            weights[key] = rng.normal(0.0, INIT_STD, shape).astype(np.float32)
    return weights
