"""The decoders people ship, in every framework (issue 53): one set of weights (made once
by transformers, kept in the cache) read by PyTorch and, through keras-hub, by Keras 3's
three backends; the tokens a greedy generation makes are the same in all four, and so
are the parameters counted. Tiny configurations of a few families (real frameworks,
real workers): a dense decoder, a mixture of experts, Gemma 3 (its own cache layout and
sliding window) and Phi-3 (read by fwbench's own converter). benchmarks/llm_families.py
checks every family fwbench holds."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FAST_TIMING_YAML, fwbench

FAMILIES = ["llama", "mixtral", "gemma3", "phi3"]
FRAMEWORKS = ["torch", "tensorflow", "keras-jax", "keras-torch"]

# Looked up, not imported: keras-hub imports TensorFlow, and TensorFlow loaded in the test
# process makes a later import of triton (torch's, in-process tests) crash it.
if importlib.util.find_spec("keras_hub") is None:
    pytest.skip("keras-hub is not installed (make setup installs it)", allow_module_level=True)


def sweep(
    tmp_path: Path,
    task: str,
    models: list[str],
    extra: str = "",
    frameworks: list[str] = FRAMEWORKS,
) -> list[dict[str, Any]]:
    spec = tmp_path / f"{task}.yaml"
    spec.write_text(
        f"name: llm-{task}\n"
        f"framework: [{', '.join(frameworks)}]\n"
        f"model: [{', '.join(models)}]\n"
        f"task: {task}\n"
        "batch_size: 1\n"
        "input_shape: input_ids=Bx8\n"
        "threads: 1\n" + extra + FAST_TIMING_YAML
    )
    proc = fwbench("sweep", str(spec), "--db", str(tmp_path / f"{task}.duckdb"), "--json",
                   timeout=1500)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    records: list[dict[str, Any]] = json.loads(proc.stdout)
    return records


def test_every_framework_generates_the_same_tokens_from_the_same_weights(
    tmp_path: Path,
) -> None:
    records = sweep(
        tmp_path,
        "generate",
        [f"hf:{family}@tiny" for family in FAMILIES],
        "new_tokens: 8\n",
    )
    assert len(records) == len(FAMILIES) * len(FRAMEWORKS)
    for family in FAMILIES:
        mine = [r for r in records if r["model"] == f"hf:{family}@tiny"]
        assert all(r["status"] == "ok" for r in mine), [(r["framework"], r["error"]) for r in mine]
        tokens = {r["framework"]: r["settings"]["generated_tokens"] for r in mine}
        first = tokens["torch"]
        assert len(first) == 8
        assert all(t == first for t in tokens.values()), (family, tokens)
        # How near each token was to a tie, from each framework's own logits: alike.
        gaps = {r["framework"]: r["settings"]["token_margins"] for r in mine}
        assert all(len(g) == 8 and min(g) >= 0 for g in gaps.values()), (family, gaps)
        assert max(abs(a - b) for a, b in zip(gaps["torch"], gaps["keras-jax"], strict=True)) < 1e-2
        assert len({r["param_count"] for r in mine}) == 1, (family, mine)
        assert not any(r["different_work"] for r in mine), family
        keras = [r for r in mine if r["framework"] != "torch"]
        assert all("keras-hub" in r["settings"]["kv_cache"] for r in keras), family
        # A generation's FLOPs, each counted from its own framework's program: keras-hub's
        # prefill computes the vocabulary's logits at every prompt position (transformers'
        # at the last only) and its decoding steps attend over the whole static cache, so
        # TensorFlow's count is the larger (1.18x here). keras-hub's Mixtral runs every
        # expert on every token and weighs their outputs by the router's choice (5.7x here:
        # 4 experts where transformers computes the 2 chosen).
        flops = {r["framework"]: r["work"]["flops_per_step"] for r in mine}
        assert flops["torch"] and flops["tensorflow"], (family, flops)
        low, high = (2.0, 8.0) if family == "mixtral" else (1.0, 1.5)
        assert low <= flops["tensorflow"] / flops["torch"] < high, (family, flops)


def test_a_decoder_trains_and_infers_in_every_framework(tmp_path: Path) -> None:
    for task in ("train", "infer", "lora"):
        records = sweep(tmp_path, task, ["hf:llama@tiny"])
        assert [r["status"] for r in records] == ["ok"] * len(FRAMEWORKS), [
            (r["framework"], r["error"]) for r in records
        ]
        assert len({r["param_count"] for r in records}) == 1
        assert not any(r["different_work"] for r in records), [
            (r["settings"], r["parity"]) for r in records
        ]
    # LoRA at keras-hub's default rank: the model's parameters counted as for any task,
    # the same adapters trained in every framework (3,328: A of 64 x heads x 4 and B of
    # 4 x 16 on each layer's query and value; PEFT's factorisation would train 1,792).
    assert {r["settings"]["trained_params"] for r in records} == {3_328}
    assert {r["settings"]["trained_check"] for r in records} == {
        "passed: each trains 3,328 parameters"
    }
    assert all("rank 4 on 4 query and value" in r["settings"]["lora_adapters"] for r in records)


def test_lora_trains_keras_hubs_adapters_in_pytorch_for_each_kind_of_projection(
    tmp_path: Path,
) -> None:
    """Qwen2's projections have biases (keras-hub trains them with the adapters), SmolLM3's
    are Dense layers (one factor for the whole projection), GPT-2's and Phi-3's query, key
    and value are one matrix in transformers (its query's and value's outputs adapted;
    GPT-2's with biases, Phi-3's with fewer value heads)."""
    models = ["hf:qwen2@tiny", "hf:smollm3@tiny", "hf:gpt2@tiny", "hf:phi3@tiny"]
    records = sweep(tmp_path, "lora", models, frameworks=["torch", "keras-jax"])
    by = {(r["model"], r["framework"]): r for r in records}
    for model in models:
        pair = [by[(model, fw)] for fw in ("torch", "keras-jax")]
        assert all(r["status"] == "ok" for r in pair), [(r["framework"], r["error"]) for r in pair]
        assert len({r["settings"]["trained_params"] for r in pair}) == 1, pair
        assert not any(r["different_work"] for r in pair), [r["settings"] for r in pair]
    assert by[("hf:qwen2@tiny", "torch")]["settings"]["trained_params"] == 3_520
    assert "whole projections" in by[("hf:smollm3@tiny", "torch")]["settings"]["lora_adapters"]
    # Per layer: A of 64 x 4 heads x 4 and B of 4 x 16 for the query and the value, and
    # their biases (64 each), 2 layers.
    gpt2 = by[("hf:gpt2@tiny", "torch")]["settings"]
    assert gpt2["trained_params"] == 2 * 2 * (64 * 4 * 4 + 4 * 16 + 64)
    assert "outputs of c_attn" in gpt2["lora_adapters"]


def test_pytorchs_adapter_is_keras_hubs_factorisation() -> None:
    import torch

    from fwbench.frameworks.torch_lora import HeadLora

    base = torch.nn.Linear(6, 4 * 3, bias=False)
    lora = HeadLora(base, heads=4, rank=2)
    update = lora.update
    torch.nn.init.normal_(update.b)  # zero at first: any update shows
    x = torch.randn(5, 6)
    # keras-hub's EinsumDense merges its kernel (hidden x heads x head_dim) with A @ B.
    kernel = base.weight.T.reshape(6, 4, 3) + update.a @ update.b
    want = torch.einsum("bd,dnh->bnh", x, kernel).flatten(1)
    assert torch.allclose(lora(x), want, atol=1e-5)
    assert (update.a.numel(), update.b.numel()) == (6 * 4 * 2, 2 * 3)


def test_pytorchs_adapter_of_one_query_key_value_matrix_adapts_the_query_and_value_alone() -> None:
    """A fused projection (4 query heads, 2 key and value heads of width 3, with a bias)
    computes what keras-hub's three layers compute when its query and value are adapted:
    the key's outputs untouched, the query's and value's biases trained, the key's not."""
    import torch

    from fwbench.frameworks.torch_lora import FusedLora

    torch.manual_seed(0)
    base = torch.nn.Linear(6, (4 + 2 + 2) * 3)
    weight, bias = base.weight.detach().clone(), base.bias.detach().clone()
    base.requires_grad_(False)
    lora = FusedLora(base, 6, (4, 2), 3, rank=2)
    for update in (lora.q, lora.v):
        torch.nn.init.normal_(update.b)
    x = torch.randn(5, 6)
    kernels = weight.T.split([12, 6, 6], dim=1)
    biases = bias.split([12, 6, 6])
    want = []
    updates = (lora.q, None, lora.v)
    for kernel, b, heads, update in zip(kernels, biases, (4, 2, 2), updates, strict=True):
        merged = kernel.reshape(6, heads, 3) + (update.a @ update.b if update else 0)
        want.append(torch.einsum("bd,dnh->bnh", x, merged).flatten(1) + b)
    assert torch.allclose(lora(x), torch.cat(want, dim=1), atol=1e-5)
    trained = {n: p.numel() for n, p in lora.named_parameters() if p.requires_grad}
    assert trained == {
        "q_bias": 12, "v_bias": 6, "q.a": 6 * 4 * 2, "q.b": 2 * 3, "v.a": 6 * 2 * 2, "v.b": 2 * 3,
    }  # fmt: skip
    lora(x).sum().backward()
    assert base.bias.grad is None  # the key's bias stays frozen


def test_lora_refuses_a_model_keras_hub_does_not_read_with_one_line() -> None:
    proc = fwbench("run", "--framework", "torch", "--model", "gpt2_tiny", "--task", "lora")
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: task: lora cannot run gpt2_tiny")
    assert line.endswith("GPT-2 as one is hf:gpt2 (hf:gpt2@tiny)")  # what runs instead


def test_a_size_too_large_for_this_host_is_an_oom_result_and_the_sweep_goes_on(
    tmp_path: Path,
) -> None:
    """Llama 3 8B's float32 weights (29.9 GiB) exceed what a 2-core CI machine has: the
    case is `oom` with the figures, before anything is built or written, and the next
    model of the sweep runs. Its parameters are counted without building it."""
    import os

    import psutil

    from fwbench.models.sources import hf

    assert hf.meta_count("llama@8b") == 8_030_261_248  # Llama 3 8B's published count
    assert hf.meta_count("llama@tiny") == hf.stored_count(hf.weights_folder("llama@tiny"))
    if psutil.virtual_memory().available > 8_030_261_248 * hf.LOADED_BYTES:
        pytest.skip("this host has the memory for Llama 3 8B's weights")
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: torch\nmodel: [hf:llama@8b, hf:llama@tiny]\ntask: infer\nbatch_size: 1\n"
        "input_shape: input_ids=Bx8\nthreads: 1\n" + FAST_TIMING_YAML
    )
    proc = fwbench("sweep", str(spec), "--db", str(tmp_path / "r.duckdb"), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    big, tiny = json.loads(proc.stdout)
    assert big["status"] == "oom", big["error"]
    assert "8.03B parameters need 29.9 GiB in float32" in big["error"]
    assert tiny["status"] == "ok", tiny["error"]
    written = Path(os.environ["FWBENCH_CACHE_DIR"]) / hf.WEIGHTS
    assert not list(written.glob("llama-8b-*"))


def test_keras_decoding_as_one_compiled_loop_makes_the_same_tokens(tmp_path: Path) -> None:
    """`--options decoding=loop`: every decoding step in one compiled loop (JAX's
    fori_loop, TensorFlow's while_loop), as keras-hub's generate() runs them; the same
    tokens as PyTorch's, on Gemma 3 (its cache a pair of tensors per layer, the loop's
    hardest carry; a single-tensor cache, Llama's, ran alike when this was written)."""
    spec = tmp_path / "loop.yaml"
    spec.write_text(
        "framework: [torch, keras-jax, tensorflow]\n"
        "model: hf:gemma3@tiny\ntask: generate\nnew_tokens: 8\n"
        "options: {keras-jax: decoding=loop, tensorflow: decoding=loop}\n"
        "batch_size: 1\ninput_shape: input_ids=Bx8\nthreads: 1\n" + FAST_TIMING_YAML
    )
    proc = fwbench("sweep", str(spec), "--db", str(tmp_path / "r.duckdb"), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    records = json.loads(proc.stdout)
    assert [r["status"] for r in records] == ["ok"] * 3, [
        (r["framework"], r["error"]) for r in records
    ]
    mine = {r["framework"]: r for r in records}
    tokens = {fw: r["settings"]["generated_tokens"] for fw, r in mine.items()}
    assert len(set(map(tuple, tokens.values()))) == 1, tokens
    for fw in ("keras-jax", "tensorflow"):
        looped = mine[fw]
        assert looped["options"] == "decoding=loop"
        assert "one compiled loop" in looped["settings"]["decoding"]
        assert looped["figures"]["tpot_s"]["median"] > 0
        assert "tpot_p50_s" not in looped["figures"]  # no step is timed alone


def test_decoding_is_a_setting_of_generation_in_the_keras_backends_that_compile() -> None:
    from fwbench.case import Case
    from fwbench.errors import SpecError
    from fwbench.tune import option_sets

    base = {"model": "gpt2_tiny", "seq_len": 8, "vocab_size": 64}
    with pytest.raises(SpecError, match="decoding applies to task generate only, not train"):
        Case.build(framework="keras-jax", task="train", options="decoding=loop", **base)
    with pytest.raises(SpecError, match="Keras 3 on PyTorch has no setting 'decoding'"):
        Case.build(framework="keras-torch", task="generate", options="decoding=loop", **base)
    assert option_sets("keras-jax", task="generate") == [None, "decoding=loop"]
    assert option_sets("keras-jax", task="train") == [None]
    assert option_sets("tensorflow", task="train") == ["onednn=on", "onednn=off"]


# Folders whose settings keras-hub's converters read elsewhere or not at all, by name:
# (architecture, config settings beyond the tiny size's).
KERAS_READS = {
    # transformers 5 writes Llama 3.1's rotary scaling into `rope_parameters`; keras-hub
    # reads it from `rope_scaling` only (unscaled, the logits were 3e-3 off).
    "llama-3.1-rope": ("llama", {"rope_parameters": {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}),
    # keras-hub's Llama and Gemma converters drop `rms_norm_eps` (Llama 2 and 3's is 1e-5)
    # and its Qwen3 builds the query and key norms with its own: a wide epsilon shows it.
    "llama-eps": ("llama", {"rms_norm_eps": 0.05}),
    "gemma-eps": ("gemma", {"rms_norm_eps": 0.05}),
    "qwen3-eps": ("qwen3", {"rms_norm_eps": 0.05}),
}  # fmt: skip

REFERENCE_SIDE = """
import json, sys
from pathlib import Path
import torch, transformers
from fwbench.models.sources import hf
found = {}
for name, (arch, extra) in json.loads(sys.argv[2]).items():
    folder = Path(sys.argv[1]) / name
    kind = hf.ARCHS[arch].model_type or arch
    config = transformers.AutoConfig.for_model(kind, **{**hf.ARCHS[arch].config("tiny"), **extra})
    config.architectures = [type(transformers.AutoModelForCausalLM.from_config(config)).__name__]
    config.save_pretrained(folder)
    weights = hf.weights_folder(str(folder))
    model = transformers.AutoModelForCausalLM.from_pretrained(weights, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([list(range(3, 43))])).logits[0]
    found[name] = {"weights": str(weights), "logits": logits.tolist()}
print(json.dumps(found))
"""

KERAS_SIDE = """
import json, sys
from pathlib import Path
import numpy as np
from fwbench.models import keras_hub_lm
found = {}
for name, given in json.loads(sys.stdin.read()).items():
    model = keras_hub_lm.load(Path(given["weights"]))
    logits = np.asarray(model(np.array([list(range(3, 43))])))[0]
    found[name] = float(np.max(np.abs(logits - np.array(given["logits"]))))
print(json.dumps(found))
"""


def test_keras_reads_what_its_converters_read_elsewhere_or_drop_as_transformers_does(
    tmp_path: Path,
) -> None:
    """Settings keras-hub 0.32's converters miss (KERAS_READS), read through the cache's
    copy of the config or set after loading: over 40 positions (past the 32 Llama 3.1
    scales beyond) the logits on JAX are transformers' (measured: 2e-7 at most; without
    the scaling 3e-3 off, with keras-hub's own epsilon 0.5-0.7)."""
    import os
    import subprocess
    import sys

    def python(script: str, *args: str, given: str = "", **env: str) -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, "-c", script, *args], input=given, capture_output=True,
            text=True, timeout=600, cwd=tmp_path, env=os.environ | env,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return found

    reference = python(REFERENCE_SIDE, str(tmp_path), json.dumps(KERAS_READS))
    keras = python(KERAS_SIDE, given=json.dumps(reference), KERAS_BACKEND="jax")
    assert set(keras) == set(KERAS_READS)
    assert all(worst < 1e-4 for worst in keras.values()), keras


SHADOW_SIDE = """
import json, sys
from pathlib import Path
from fwbench.models import keras_hub_lm
folder = Path(sys.argv[1])
config = json.loads((folder / "config.json").read_text())
shadow = keras_hub_lm._readable(folder, config)
print(json.dumps({
    "shadow": str(shadow),
    "links": {p.name: str(p.resolve()) for p in shadow.iterdir() if p.name != "config.json"},
    "config": json.loads((shadow / "config.json").read_text()),
}))
"""


def test_kerass_copy_of_a_renamed_config_follows_the_folders_weights_as_they_are_now(
    tmp_path: Path,
) -> None:
    """A folder resharded after a first load (its one file replaced by an index and two
    shards) gets a copy linking the shards alone: the stale link to the file that went
    had stayed beside them (and a dangling one stopped a later load); an unchanged
    folder finds the copy it had."""
    import os
    import subprocess
    import sys

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps({"model_type": "qwen3_moe", "num_local_experts": 4})
    )
    (folder / "model.safetensors").write_bytes(b"one")

    def shadow() -> dict[str, Any]:
        proc = subprocess.run(
            [sys.executable, "-c", SHADOW_SIDE, str(folder)], capture_output=True, text=True,
            timeout=300, env=os.environ | {"KERAS_BACKEND": "jax",
                                           "FWBENCH_CACHE_DIR": str(tmp_path / "cache")},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
        return found

    first = shadow()
    assert first["links"] == {"model.safetensors": str((folder / "model.safetensors").resolve())}
    assert first["config"]["num_experts"] == 4
    (folder / "model.safetensors").unlink()
    for name in ("a.safetensors", "b.safetensors"):
        (folder / name).write_bytes(b"shard")
    index = {"weight_map": {"w1": "a.safetensors", "w2": "b.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    second = shadow()
    wanted = ["a.safetensors", "b.safetensors", "model.safetensors.index.json"]
    assert second["links"] == {name: str((folder / name).resolve()) for name in wanted}
    assert shadow()["shadow"] == second["shadow"]
