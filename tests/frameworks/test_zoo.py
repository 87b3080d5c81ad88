"""The language and speech models and Inception-v3: each builds, trains one step and
infers one step in both frameworks at a tiny size, doing the same work in both (real
frameworks, real workers)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import FAST_TIMING_YAML, fwbench

ZOO = [
    "inception_v3",
    "bert_base",
    "gpt2_tiny",
    "transformer_base",
    "lstm_lm",
    "lstm_lm_cell",
    "deepspeech2",
]

TINY_SWEEP = (
    f"""
name: zoo
model: [{", ".join(ZOO)}]
task: [train, infer]
mode: {{torch: eager, tensorflow: graph}}
batch_size: 2
input_size: 75
seq_len: 16
vocab_size: 64
freq_bins: 32
num_classes: 10
threads: 1
timeout_s: 300
"""
    + FAST_TIMING_YAML
)


def test_every_model_trains_and_infers_in_both_frameworks_with_equal_work(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "zoo.yaml"
    sweep.write_text(TINY_SWEEP)
    proc = fwbench("sweep", str(sweep), "--db", str(tmp_path / "z.duckdb"), "--json")
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert len(records) == len(ZOO) * 2 * 2
    by_workload: dict[tuple[str, str], dict[str, dict[str, object]]] = {}
    for r in records:
        assert r["status"] == "ok", (r["framework"], r["model"], r["task"], r["error"])
        assert r["step_time_s"]["median"] > 0
        by_workload.setdefault((r["model"], r["task"]), {})[r["framework"]] = r
    for (model, task), pair in by_workload.items():
        torch, tf = pair["torch"], pair["tensorflow"]
        assert isinstance(torch["param_count"], int) and isinstance(tf["param_count"], int)
        assert abs(torch["param_count"] / tf["param_count"] - 1) <= 0.02, (model, pair)
        flops = [r["work"]["flops_per_step"] for r in (torch, tf)]  # type: ignore[index]
        assert all(f and f > 0 for f in flops), (model, task, torch["work"], tf["work"])
        assert abs(flops[0] / flops[1] - 1) <= 0.02, (model, task, flops)
    # Each model records the loss and optimizer its spec states.
    ds2 = by_workload[("deepspeech2", "train")]["torch"]["settings"]
    assert "CTC" in ds2["loss"]  # type: ignore[index]
    bert = by_workload[("bert_base", "train")]["tensorflow"]["settings"]
    assert bert["optimizer"].startswith("Adam")  # type: ignore[index]
    for framework in ("torch", "tensorflow"):
        gpt = by_workload[("gpt2_tiny", "train")][framework]["settings"]
        assert gpt["optimizer"].startswith("AdamW(")  # type: ignore[index]
