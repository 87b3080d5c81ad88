"""Every model builds in both frameworks, with the same parameter count (real frameworks)."""

from __future__ import annotations

import json

from tests.conftest import fwbench

EXPECTED_TORCHVISION = {  # trainable parameters, torchvision at 224 px, 1000 classes
    "resnet18": 11_689_512,
    "resnet50": 25_557_032,
    "resnet152": 60_192_808,
    "vgg16": 138_357_544,
    "mobilenet_v2": 3_504_872,
    "efficientnet_b4": 19_341_616,
}


def test_models_lists_every_model_with_matching_counts_in_both_frameworks() -> None:
    proc = fwbench("models", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(EXPECTED_TORCHVISION) <= set(rows)
    for name, expected in EXPECTED_TORCHVISION.items():
        row = rows[name]
        assert row["errors"] == {}, (name, row["errors"])
        assert row["params"]["torch"] == expected
        assert row["max_rel_diff"] <= 0.02, (name, row["params"])
        assert row["mismatch"] is False
    # Written to match torchvision layer for layer.
    for name in ("resnet18", "resnet50", "resnet152"):
        assert rows[name]["params"]["tensorflow"] == EXPECTED_TORCHVISION[name]
