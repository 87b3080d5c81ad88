"""Task `generate`: a greedy generation with a key/value cache, timed token by token, in
PyTorch, TensorFlow, Keras-JAX and Keras on PyTorch from one set of weights (real
frameworks, GPT-2 at the test size): the same tokens everywhere, the figures of a
generation with their intervals, no recompilation while timed, and bad input refused
before any work."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from fwbench.case import Case
from fwbench.errors import SpecError
from fwbench.launch.records import check_outputs
from fwbench.result import Result
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING_YAML, fwbench

FIGURES = {"ttft_s", "tpot_s", "tpot_p50_s", "tpot_p90_s"}


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    """One sweep: gpt2_tiny generating 6 tokens after an 8-token prompt, batch 2, in the
    four frameworks that generate (their default modes: eager, graph, jit, eager)."""
    tmp = tmp_path_factory.mktemp("generate")
    spec = tmp / "s.yaml"
    spec.write_text(
        "framework: [torch, tensorflow, keras-jax, keras-torch]\nmodel: gpt2_tiny\n"
        "task: generate\n"
        "batch_size: 2\nseq_len: 8\nnew_tokens: 6\nthreads: 1\n" + FAST_TIMING_YAML
    )
    db = tmp / "r.duckdb"
    proc = fwbench("sweep", str(spec), "--db", str(db), "--json")
    assert proc.returncode == 0, proc.stderr
    return db, json.loads(proc.stdout)


def test_every_framework_generates_the_same_tokens_and_reports_a_generations_figures(
    generated: tuple[Path, list[dict]],
) -> None:
    db, records = generated
    assert sorted(r["framework"] for r in records) == [
        "keras-jax",
        "keras-torch",
        "tensorflow",
        "torch",
    ]
    for r in records:
        assert r["status"] == "ok", r["error"]
        assert r["task_dims"] == "new_tokens=6"
        settings = r["settings"]
        assert len(settings["generated_tokens"]) == 6
        assert len(settings["token_margins"]) == 6 and min(settings["token_margins"]) >= 0
        # Keys and values: 2 layers x batch 2 x (8 + 6) positions x 64 wide, fp32.
        assert settings["kv_cache_bytes"] == 2 * 2 * 2 * 14 * 64 * 4
        assert settings["token_check"].startswith(
            "passed: keras-jax/jit, keras-torch/eager, tensorflow/graph, "
        )
        assert not r["different_work"]
        # Each figure over the runs, with its interval; each run's a value per block.
        assert set(r["figures"]) == FIGURES
        for figure in r["figures"].values():
            assert 0 < figure["ci_low"] <= figure["median"] <= figure["ci_high"]
        run = r["runs"][0]
        assert set(run["figures"]) == FIGURES
        assert len(run["figures"]["tpot_s"]["samples"]) == len(run["samples"])
        # A decoding step is faster than the whole generation it is part of.
        assert r["figures"]["tpot_s"]["median"] < r["step_time_s"]["median"]
        # Throughput counts tokens: batch x new tokens per generation.
        assert r["throughput"] == pytest.approx(2 * 6 / r["step_time_s"]["median"])
    tokens = {tuple(r["settings"]["generated_tokens"]) for r in records}
    assert len(tokens) == 1
    compiled = {r["framework"]: r["settings"] for r in records}
    for fw in ("tensorflow", "keras-jax"):
        # The prefill and the decoding step compiled once each, none while timed.
        assert compiled[fw]["compiles_after_warmup"] == 2, fw
        assert compiled[fw]["compiles_after_timing"] == 2, fw
    # The database gives back what the run reported, figures and all.
    with ResultStore(db, read_only=True) as store:
        back = {r.case.framework: r for r in store.results()}
    for r in records:
        stored = back[r["framework"]]
        assert stored.verdict_figure == "tpot_s"
        assert stored.measurement is not None
        assert stored.measurement.figure("tpot_s").median == r["figures"]["tpot_s"]["median"]
        assert Result.from_record(stored.to_record()) == stored


def read_ms(record: dict, figure: str) -> float:
    """A figure as its verdict reads it, in ms: the geometric mean over runs of each
    run's value by the estimator the record was read with."""
    r = Result.from_record(record)
    assert r.measurement is not None
    return statistics.geometric_mean(r.measurement.per_run(r.reading.estimator, figure)) * 1e3


def test_a_summary_compares_time_per_output_token(generated: tuple[Path, list[dict]]) -> None:
    db, records = generated
    proc = fwbench("results", "--summary", "--db", str(db))
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "Generate rows show and compare the time per output token" in text
    # The figure its verdict reads: the geometric mean of each run's p25 of its TPOT.
    tpot = {r["framework"]: read_ms(r, "tpot_s") for r in records}
    assert f"{tpot['torch']:.2f} ±" in text or f"{tpot['torch']:.2f} (" in text


def test_generations_that_differ_are_flagged_as_different_work(
    generated: tuple[Path, list[dict]], monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = generated
    with ResultStore(db, read_only=True) as store:
        results = store.results()
    # Other weights make other tokens in a real framework: the check has something to
    # catch (PyTorch, in this process).
    from fwbench.frameworks import generation
    from fwbench.frameworks.torch import TorchAdapter

    case = results[0].case.model_copy(update={"framework": "torch", "mode": "eager"})
    made = []
    for seed in (0, 1):
        monkeypatch.setattr(generation, "WEIGHTS_SEED", seed)
        workload = TorchAdapter().build(case)
        workload.step()
        made.append(workload.counters()["generated_tokens"])
    assert made[0] != made[1]
    assert made[0] == results[0].settings["generated_tokens"]
    # A variant whose tokens differ from the others' marks all of them.
    other = [
        r.model_copy(
            update={"settings": {**r.settings, "generated_tokens": made[1]}}
            if r.case.framework == "tensorflow"
            else {}
        )
        for r in results
    ]
    checked = check_outputs(other)
    assert all(r.different_work for r in checked)
    assert all("generations differ" in (r.different_work_reason or "") for r in checked)
    assert any("different work across frameworks: failed:" in w for w in checked[0].warnings)


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"model": "resnet18"}, "model: task generate does not take resnet18; valid choices: "),
        ({"task_dims": "new_tokens=0"}, "new_tokens=0 is out of range (valid: 2 to 65536)"),
        ({"task_dims": "new_tokens=-3"}, "new_tokens=-3 is out of range"),
        (
            {"seq_len": 100},
            "a prompt of seq_len 100 and 32 new tokens need 132 positions; gpt2_tiny's "
            "context holds 128",
        ),
        ({"framework": "onnxruntime"}, "ONNX Runtime cannot generate: it runs one exported"),
        ({"framework": "openvino"}, "OpenVINO cannot generate"),
    ],
)
def test_a_generation_that_cannot_be_made_is_refused_naming_why(
    fields: dict[str, object], says: str
) -> None:
    given = {"framework": "torch", "model": "gpt2_tiny", "task": "generate", **fields}
    with pytest.raises(SpecError, match=re.escape(says)):
        Case.build(**given)


def test_the_cli_refuses_a_bad_generation_in_one_line_writing_nothing(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench("run", "--framework", "torch", "--model", "gpt2_tiny", "--task", "generate",
                   "--task-dims", "new_tokens=0", "--db", str(db))  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert "new_tokens=0 is out of range" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not db.exists()
    # Left out, a generation makes 32 tokens.
    case = Case.build(framework="torch", model="gpt2", task="generate")
    assert case.task_dims == "new_tokens=32" and case.shape.endswith("new32")


def test_a_report_has_a_generation_table_with_both_times_and_their_verdicts(
    generated: tuple[Path, list[dict]], tmp_path: Path
) -> None:
    db, records = generated
    out = tmp_path / "r.md"
    proc = fwbench("report", str(db), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    section = text[text.index("## Generation") :]
    assert (
        "| model | batch | shape | variant | TTFT ms | TPOT ms (mean step) | tokens/s "
        "| TPOT p50 ms | TPOT p90 ms |"
    ) in section
    for r in records:
        assert f"| {r['framework']}/" in section
        assert f"{read_ms(r, 'ttft_s'):.3g} (" in section
    verdict_row = next(line for line in section.splitlines() if "| verdict |" in line)
    assert (
        verdict_row.count("faster")
        + verdict_row.count("inconclusive")
        + verdict_row.count("equivalent")
        == 2
    )


def test_pytorch_compiled_generation_makes_the_same_tokens_through_a_static_cache() -> None:
    """Mode compile: transformers' StaticCache under torch.compile, graphs made in the
    first generations only (the cache's first use, then its reuse), none after."""
    from fwbench.frameworks.torch import TorchAdapter

    made = {}
    for mode in ("eager", "compile"):
        case = Case.build(framework="torch", mode=mode, model="gpt2_tiny", task="generate",
                          batch_size=2, seq_len=8, task_dims="new_tokens=6", threads=1)  # fmt: skip
        workload = TorchAdapter().build(case)
        for _ in range(3):
            workload.step()
        graphs = workload.compile_count()
        workload.step()
        assert workload.compile_count() == graphs, mode
        made[mode] = workload.counters()["generated_tokens"]
        assert workload.settings()["kv_cache"].startswith(
            "transformers StaticCache" if mode == "compile" else "transformers DynamicCache"
        )
    assert made["compile"] == made["eager"]
