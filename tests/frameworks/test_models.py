"""Every model builds in both frameworks, with the same parameter count (real frameworks)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.conftest import fwbench

EXPECTED_TORCHVISION = {  # trainable parameters, torchvision at 224 px, 1000 classes
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "resnet152": 60_192_808,
    "vgg16": 138_357_544,
    "mobilenet_v2": 3_504_872,
    "efficientnet_b4": 19_341_616,
}
# Published sizes (PyTorch side, default dimensions), within 2%.
PUBLISHED = {
    "inception_v3": 23.8e6,  # torchvision, without the auxiliary head
    "bert_base": 110e6,  # Devlin et al.: "110M"
    "transformer_base": 93.3e6,  # 44M of layers + two 32k x 512 embeddings + output layer
    "lstm_lm": 19.8e6,  # Zaremba et al. medium: 650 wide, 10k words
    "lstm_lm_cell": 19.8e6,
    "deepspeech2": 86.6e6,  # deepspeech.pytorch: 5 bidirectional LSTMs of 1024
    "gpt2": 124_439_808,  # GPT-2 small as Hugging Face's gpt2 checkpoint holds it (tied)
}


def test_models_lists_every_model_with_matching_counts_in_every_framework() -> None:
    """Each framework counts from its models' shapes, not their values (Keras' stateless
    scope, Flax's eval_shape, PyTorch's meta device): the counts must be those of the
    models built whole, which torchvision's and the published sizes pin down."""
    keras = ("tensorflow", "keras-jax", "keras-torch")
    frameworks = ("torch", *keras, "flax")
    proc = fwbench("models", "--json", "--no-flops", *(f"--framework={fw}" for fw in frameworks))
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(EXPECTED_TORCHVISION) <= set(rows)
    for name, expected in EXPECTED_TORCHVISION.items():
        row = rows[name]
        assert row["errors"] == {}, (name, row["errors"])
        # Written to match torchvision layer for layer, in Keras and in Flax.
        assert set(row["params"].values()) == {expected}, (name, row["params"])
        assert row["mismatch"] is False
    for name, size in PUBLISHED.items():
        row = rows[name]
        assert row["errors"] == {}, (name, row["errors"])
        assert abs(row["params"]["torch"] / size - 1) <= 0.02, (name, row["params"])
        assert row["max_rel_diff"] <= 0.02, (name, row["params"])
    for name, row in rows.items():
        # Keras' backends build the same Keras models; Flax only the models it implements.
        assert {row["params"][fw] for fw in keras} == {row["params"]["tensorflow"]}, name
        assert set(row["params"]) - {"flax"} == {"torch", *keras}, name
    assert {n for n, row in rows.items() if "flax" in row["params"]} == {
        *EXPECTED_TORCHVISION,
        "inception_v3",
        "gpt2",
        "gpt2_tiny",
    }
    assert rows["bert_base"]["input_kind"] == "tokens"
    assert rows["deepspeech2"]["dims"] == {"seq_len": 200, "freq_bins": 161, "num_classes": 29}
    # GPT-2 is written layer for layer after transformers' GPT2LMHeadModel: equal exactly.
    assert set(rows["gpt2"]["params"].values()) == {124_439_808}
    assert rows["inception_v3"]["params"]["flax"] == rows["inception_v3"]["params"]["torch"]


def test_models_counts_inference_flops_per_framework() -> None:
    proc = fwbench("models", "--model", "lstm_lm", "--model", "resnet18", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == {"lstm_lm", "resnet18"}
    # One 35-token sequence: 2 layers x 35 steps x 2 x 4 gates x 650 x 1300, plus the
    # 650 x 10k output layer at each of the 35 positions.
    lstm = 2 * 35 * 2 * 4 * 650 * 1300 + 35 * 2 * 650 * 10_000
    assert rows["lstm_lm"]["infer_flops"] == {"torch": lstm, "tensorflow": lstm}
    assert rows["resnet18"]["flops_rel_diff"] == 0


def test_models_refuses_an_unknown_framework_in_one_line() -> None:
    proc = fwbench("models", "--framework", "caffe", "--no-flops")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "unknown framework 'caffe'; valid choices: torch," in lines[0]


def test_models_keeps_its_counts_in_the_cache(tmp_path: Path) -> None:
    """Counted once per framework version; a model asked for by name is counted alone;
    --refresh counts again; counts print as whole numbers."""
    env = {**os.environ, "FWBENCH_CACHE_DIR": str(tmp_path / "cache")}
    args = ["models", "--model", "resnet18", "--framework", "torch", "--no-flops"]
    cold = fwbench(*args, env=env)
    assert cold.returncode == 0, cold.stderr
    assert "counted parameters of 1 model-framework pairs" in cold.stderr
    assert "11,689,512 " in cold.stdout and "11,689,512.0" not in cold.stdout
    warm = fwbench(*args, env=env)
    assert warm.returncode == 0 and "counted" not in warm.stderr
    assert warm.stdout == cold.stdout
    again = fwbench(*args, "--refresh", env=env)
    assert "(0 from the cache)" in again.stderr
