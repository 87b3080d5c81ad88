"""JAX as its users write it (issue 51): Flax NNX modules and optax, in the three ways a
step is written (split once and jax.jit over merge; nnx.jit; eager), real workers."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.errors import SpecError
from fwbench.models.sources import hf
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING, fwbench

if importlib.util.find_spec("flax") is None:
    pytest.skip("flax is not installed (make setup installs it)", allow_module_level=True)


def test_flax_trains_and_infers_a_resnet_with_pytorchs_parameters_in_every_mode(
    tmp_path: Path,
) -> None:
    small = {"batch_size": 2, "threads": 1, "model": "resnet18", "input_size": 32}
    cases = [
        Case.build(**small, framework="torch", num_classes=10, task="train"),
        *(
            Case.build(**small, framework="flax", mode=mode, num_classes=10, task="train")
            for mode in ("jit", "nnx-jit", "eager")
        ),
        Case.build(**small, framework="flax", num_classes=10, task="infer"),
        Case.build(**small, framework="flax", num_classes=10, task="train", precision="bf16"),
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        timing = FAST_TIMING.replace(min_runs=1, max_runs=1)
        results = list(run_cases(cases, store, "flax", RunOptions(timing=timing)))
    torch, *flax = results
    assert torch.status == "ok", torch.error
    for r in flax:
        label = r.case.label()
        assert r.status == "ok", (label, r.error)
        assert r.param_count == torch.param_count == 11_181_642, label
        assert r.environment["flax"] and r.environment["optax"], label
        assert r.settings["layout"] == "channels_last"
        assert r.measurement is not None and r.measurement.step_time_s.median > 0
        if r.case.mode == "jit":
            assert r.settings["flax_step"].startswith("nnx.split once, jax.jit over nnx.merge")
        if r.case.mode != "eager":
            # One compilation, before the timed blocks; none inside them.
            assert r.settings["jit_compilations"] == 1, label
            assert r.settings["compiles_after_timing"] == r.settings["compiles_after_warmup"]
        else:
            assert "jit_compilations" not in r.settings, label
    assert [r.case.mode for r in flax] == ["jit", "nnx-jit", "eager", "jit", "jit"]
    assert flax[-1].settings["compute_dtype"] == "bfloat16"
    assert flax[0].settings["flax_step"].endswith("passed as nnx.Variables")
    assert flax[0].settings["compute_dtype"] == "float32"


def test_flax_runs_vgg16_and_mobilenet_v2_with_torchvisions_parameters(tmp_path: Path) -> None:
    """The ASU study's other networks: VGG-16 (inference: its 128M parameters train slowly
    on two cores) and MobileNetV2 (training: BatchNorm's statistics and dropout's key are
    state the jitted step carries), parameters equal to torchvision's."""
    small = {"batch_size": 2, "threads": 1, "input_size": 32, "num_classes": 10}
    cases = [
        Case.build(**small, framework=fw, model=model, task=task)
        for model, task in (("vgg16", "infer"), ("mobilenet_v2", "train"))
        for fw in ("torch", "flax")
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        timing = FAST_TIMING.replace(min_runs=1, max_runs=1)
        results = list(run_cases(cases, store, "flax", RunOptions(timing=timing)))
    for r in results:
        assert r.status == "ok", (r.case.label(), r.error)
    vgg_torch, vgg_flax, mobile_torch, mobile_flax = results
    assert vgg_flax.param_count == vgg_torch.param_count == 134_301_514
    assert mobile_flax.param_count == mobile_torch.param_count == 2_236_682
    assert mobile_flax.settings["jit_compilations"] == 1


def test_flax_efficientnet_b4_has_torchvisions_parameters() -> None:
    """Built in this process, as shapes (a run's compile costs minutes on two cores; the
    train step was run by hand: docs/flax.md)."""
    import torchvision
    from flax import nnx

    from fwbench.models.flax_vision import efficientnet_b4
    from fwbench.models.sources.flax_callable import trainable

    torch_model = torchvision.models.efficientnet_b4(weights=None, num_classes=10)
    expected = sum(p.numel() for p in torch_model.parameters() if p.requires_grad)
    assert trainable(nnx.eval_shape(lambda: efficientnet_b4(num_classes=10))) == expected
    assert expected == 17_566_546


def test_flax_inception_v3_has_torchvisions_parameters_and_shapes() -> None:
    """torchvision's Inception-v3 without its auxiliary head: the same trainable
    parameters, and the smallest input both accept (75 px) classified alike. Flax's side
    is built and called as shapes: JAX's first compilations of its eager init and call
    took most of a minute here, and shapes are what is checked."""
    import jax
    import jax.numpy as jnp
    import torch
    import torchvision
    from flax import nnx

    from fwbench.models.flax_inception import inception_v3
    from fwbench.models.sources.flax_callable import trainable

    torch_model = torchvision.models.inception_v3(
        weights=None, aux_logits=False, init_weights=False, num_classes=10
    )
    expected = sum(p.numel() for p in torch_model.parameters() if p.requires_grad)
    model = nnx.eval_shape(lambda: inception_v3(num_classes=10))
    assert trainable(model) == expected == 21_806_058
    model.eval()
    torch_model.eval()
    images = jax.ShapeDtypeStruct((2, 75, 75, 3), jnp.float32)
    assert nnx.eval_shape(lambda m, x: m(x), model, images).shape == (2, 10)
    assert tuple(torch_model(torch.ones(2, 3, 75, 75)).shape) == (2, 10)


def test_flax_gpt2_computes_pytorchs_logits_with_and_without_its_cache() -> None:
    """The same weights (gpt_weights) in both: the same logits over a whole sequence, and
    through the static cache (a prefill, then one token at a time) the same logits at
    each position; GPT-2 small has PyTorch's 124,439,808 parameters."""
    import jax.numpy as jnp
    import numpy as np
    import torch

    from fwbench.models import flax_gpt, gpt_weights, torch_gpt
    from fwbench.models.sources.flax_callable import trainable

    weights = gpt_weights.random_weights("gpt2_tiny", 32, 512, 0)
    reference = torch_gpt.GPT2("gpt2_tiny", 32, 512)
    torch_gpt.load_weights(reference, weights)
    reference.eval()
    model = flax_gpt.gpt2("gpt2_tiny", 32, 512)
    flax_gpt.load_weights(model, weights)
    model.eval()
    ids = np.random.default_rng(0).integers(0, 512, (2, 12)).astype(np.int32)
    with torch.no_grad():
        expected = reference(torch.from_numpy(ids).long()).numpy()
    assert np.abs(np.asarray(model(jnp.asarray(ids))) - expected).max() < 1e-5
    from flax import nnx

    # Jitted (op by op, each of JAX's ops compiles alone: seconds here).
    step = nnx.jit(lambda m, ids, at, cache: m.forward(ids, at, cache, last_only=True))
    cache = model.empty_cache(2, 12, jnp.float32)
    logits, cache = step(model, jnp.asarray(ids[:, :6]), 0, cache)
    stepped = [np.asarray(logits[:, 0])]
    for position in range(6, 12):
        token = jnp.asarray(ids[:, position : position + 1])
        logits, cache = step(model, token, jnp.int32(position), cache)
        stepped.append(np.asarray(logits[:, 0]))
    assert np.abs(np.stack(stepped, axis=1) - expected[:, 5:]).max() < 1e-5
    # Counted on its shapes alone (building 124M random weights takes seconds).
    small = nnx.eval_shape(lambda: flax_gpt.gpt2("gpt2", 128, 50257))
    assert trainable(small) == 124_439_808


def test_flax_gpt2_generates_pytorchs_tokens_in_every_mode(tmp_path: Path) -> None:
    """A greedy generation from the shared weights and prompt, in Flax's three modes and
    PyTorch: the same tokens (token_check); under jit one program for the prefill and
    one for every decoding step (the static cache keeps their shapes)."""
    small = {"model": "gpt2_tiny", "task": "generate", "batch_size": 1, "seq_len": 8}
    small |= {"threads": 1, "task_dims": "new_tokens=4"}
    cases = [
        *(Case.build(**small, framework="flax", mode=m) for m in ("jit", "nnx-jit", "eager")),
        Case.build(**small, framework="torch"),
        Case.build(**small, framework="flax", options="state=arrays"),
    ]
    with ResultStore(tmp_path / "r.duckdb") as store:
        timing = FAST_TIMING.replace(min_runs=1, max_runs=1)
        results = list(run_cases(cases, store, "flax", RunOptions(timing=timing)))
    for r in results:
        assert r.status == "ok", (r.case.label(), r.error)
        assert str(r.settings["token_check"]).startswith("passed"), r.settings["token_check"]
        assert r.param_count == 141_056
    jit, nnx_jit = results[:2]
    assert jit.settings["jit_compilations"] == nnx_jit.settings["jit_compilations"] == 2
    assert jit.settings["kv_cache"].startswith("static")
    assert results[-1].settings["jit_compilations"] == 2
    assert results[-1].settings["flax_step"] == "the state passed as its arrays (nnx.as_pure)"
    assert len(jit.settings["generated_tokens"]) == 4


USER_MODULE = """
import jax
from flax import nnx


class MLP(nnx.Module):
    def __init__(self, rngs):
        self.a = nnx.Linear(16, 32, rngs=rngs)
        self.b = nnx.Linear(32, 10, rngs=rngs)

    def __call__(self, x):
        return self.b(jax.nn.relu(self.a(x)))


def build():
    return MLP(nnx.Rngs(0))


def not_a_module():
    return 3
"""


def test_a_users_flax_module_trains_and_infers_from_its_function(tmp_path: Path) -> None:
    """`flax:file.py:function` (issue 51, item 4): an NNX module the user's function
    returns, its inputs from --input-shape, trained on its objective in both jitted
    ways and inferred in bf16; another framework, or a function returning something
    else, is refused in one line with nothing written."""
    nets = tmp_path / "nets.py"
    nets.write_text(USER_MODULE)
    model = f"flax:{nets}:build"
    db = tmp_path / "r.duckdb"
    common = ("--input-shape", "x=Bx16:float32", "--batch-size", "4", "--threads", "1")
    common += ("--min-runs", "1", "--max-runs", "1", "--max-time", "0.2", "--db", str(db))
    train = fwbench(
        "run", "--framework", "flax", "--mode", "jit", "--mode", "nnx-jit", "--model", model,
        "--task", "train", "--objective", "classify", *common,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr
    infer = fwbench(
        "run", "--framework", "flax", "--model", model, "--task", "infer",
        "--precision", "bf16", *common,
    )  # fmt: skip
    assert infer.returncode == 0, infer.stderr
    with ResultStore(db, read_only=True) as store:
        results = store.results()
    assert [(r.case.mode, r.case.task, r.status) for r in results] == [
        ("jit", "train", "ok"),
        ("nnx-jit", "train", "ok"),
        ("jit", "infer", "ok"),
    ], [r.error for r in results]
    assert {r.param_count for r in results} == {16 * 32 + 32 + 32 * 10 + 10}
    assert results[-1].settings["compute_dtype"] == "bfloat16"
    for framework, function, said in (
        ("torch", "build", "a Flax NNX module runs on Flax; no other framework reads it"),
        ("flax", "not_a_module", "returned a int, not a flax.nnx.Module"),
    ):
        other = tmp_path / f"{framework}.duckdb"
        proc = fwbench(
            "run", "--framework", framework, "--model", f"flax:{nets}:{function}",
            "--input-shape", "x=Bx16:float32", "--db", str(other),
        )  # fmt: skip
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
        assert said in proc.stderr
        assert not other.exists()


def test_flax_refuses_what_it_does_not_implement_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="valid choices for flax: jit, nnx-jit, eager"):
        Case.build(framework="flax", model="resnet18", mode="graph")
    with pytest.raises(SpecError, match="valid choices for flax: fp32, bf16"):
        Case.build(framework="flax", model="resnet18", precision="fp16")
    db = tmp_path / "never.duckdb"
    proc = fwbench("run", "--framework", "flax", "--model", "lstm_lm", "--db", str(db))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "'lstm_lm' has no flax implementation; it has: tensorflow, torch" in proc.stderr
    assert not db.exists()


def test_a_model_flax_does_not_build_is_never_counted_or_tuned_in_it() -> None:
    """Installing flax made every `fwbench tune` of a model it does not build fail ('has
    no flax implementation'), and a one-framework run count its parameters in Flax."""
    from fwbench.catalog.frameworks import core_frameworks
    from fwbench.launch.counting import parity_frameworks

    assert parity_frameworks([Case.build(framework="torch", model="lstm_lm")]) == [
        "tensorflow",
        "torch",
    ]
    assert "flax" in parity_frameworks([Case.build(framework="torch", model="resnet18")])
    assert "flax" not in core_frameworks()  # tune's default, as its --framework help says


def test_sharded_training_on_two_host_devices_runs_and_records_its_strategy(
    tmp_path: Path,
) -> None:
    """jax.sharding data parallelism (issue 51, item 5): one process, XLA's CPU split into
    two host devices by the launcher, the global batch sharded over them."""
    db = tmp_path / "r.duckdb"
    out = fwbench(
        "run", "--framework", "flax", "--strategy", "sharded", "--world-size", "2",
        "--threads", "1", "--model", "resnet18", "--input-size", "32", "--batch-size", "2",
        "--num-classes", "10", "--max-time", "0.3", "--target-ci", "0.5", "--min-runs", "1",
        "--db", str(db), "--json",
        timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["status"] == "ok", r["error"]
    assert (r["world_size"], r["batch_size"], r["global_batch_size"]) == (2, 2, 4)
    assert r["throughput"] * r["step_time_s"]["median"] == pytest.approx(4)  # global
    d = r["distributed"]
    assert (d["processes"], d["replicas"], d["devices"]) == (1, 2, ["cpu:0", "cpu:1"])
    assert "NamedSharding" in d["backend"] and "SyncBatchNorm" in d["batch_norm"]
    assert "share the process's threads and cores" in d["logical_devices"]
    assert r["param_count"] == 11_181_642
    # jax.profiler's trace shows XLA's all-reduce of the gradients between the devices.
    comm = d["communication"]
    assert comm["profiler"] == "jax.profiler (XPlane)" and comm["error"] is None, comm
    assert "all-reduce" in comm["ops"] and comm["in_flight_s"] > 0
    report = tmp_path / "report.md"
    assert fwbench("report", str(db), "-o", str(report)).returncode == 0
    scaling = "| flax/jit/sharded | 2 | 4 |"  # the scaling table's row: 2 workers, batch 4
    (row,) = [line for line in report.read_text().splitlines() if scaling in line]
    # Its communication column: the all-reduce's time in flight per step, ms (share).
    assert re.search(r"\| [\d.]+ \(\d+%\) \|$", row), row


SHARDED_AGAINST_WHOLE = """
import json
import jax
import numpy as np
from fwbench.case import Case
from fwbench.distributed.flax_dp import ShardedWorkload
from fwbench.frameworks.flax_nnx import FlaxAdapter, FlaxWorkload

small = dict(framework="flax", model="resnet18", input_size=32, num_classes=10, threads=1)
adapter = FlaxAdapter()
adapter.configure("cpu", 1)
# The replicas' state passed as arrays (nnx.as_pure), the whole batch's as Variables.
sharded = ShardedWorkload(adapter, Case.build(**small, batch_size=2, strategy="sharded",
                                              world_size=2, options="state=arrays"))
whole = Case.build(**small, batch_size=4)
plain = FlaxWorkload(adapter.build_model(whole.reference, whole.dims), whole, whole.model_spec)
for w in (sharded, plain):
    w.step()
    w.sync()
a, b = jax.tree.leaves(sharded.state), jax.tree.leaves(plain.state)
diffs = [
    float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
    / max(1.0, float(np.max(np.abs(np.asarray(y, np.float64)))))
    for x, y in zip(a, b, strict=True)
]
print(json.dumps({
    "devices": sorted({str(d) for leaf in a for d in leaf.devices()}),
    "losses": [float(sharded.last), float(plain.last)],
    "leaves": [len(a), len(b)],
    "worst": max(diffs),
    "steps": [sharded.settings()["flax_step"], plain.settings()["flax_step"]],
}))
"""


def test_a_sharded_step_updates_the_state_as_one_step_on_the_whole_batch(
    tmp_path: Path,
) -> None:
    """Two replicas of batch 2 train as one step of batch 4 does (the gradients' mean over
    the global batch; BatchNorm over it too): the same loss and the same new state, to
    float32's reduction order (measured: 5e-5 of each tensor's largest value), whether
    the state crosses jax.jit as arrays (the replicas') or as Variables (the whole's)."""
    import os
    import subprocess
    import sys

    env = os.environ | {
        "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        "JAX_PLATFORMS": "cpu",
    }
    proc = subprocess.run(
        [sys.executable, "-c", SHARDED_AGAINST_WHOLE],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["devices"] == ["cpu:0", "cpu:1"]  # the state is on both
    sharded, whole = found["losses"]
    assert sharded == pytest.approx(whole, rel=1e-5)
    assert found["leaves"][0] == found["leaves"][1] > 100
    assert found["worst"] < 5e-4
    arrays, variables = found["steps"]
    assert arrays.endswith("the state passed as its arrays (nnx.as_pure)"), arrays
    assert variables.endswith("the state passed as nnx.Variables"), variables


def test_flax_reads_a_llama_decoder_from_transformers_weights(tmp_path: Path) -> None:
    """The Llama-type decoder (RMSNorm, rotary positions, grouped-query attention,
    SwiGLU) read from the safetensors PyTorch reads: its parameters and greedy tokens
    are PyTorch's; it trains on the same ids."""
    timing = "timing: {min_runs: 1, max_runs: 1, run_time_s: 0.3, max_warmup_s: 0.5}\n"
    found = {}
    for task, extra in (("generate", "new_tokens: 8\n"), ("train", "")):
        spec = tmp_path / f"{task}.yaml"
        spec.write_text(
            f"name: flax-llama\nframework: [flax, torch]\nmodel: hf:llama@tiny\ntask: {task}\n"
            f"batch_size: 1\ninput_shape: input_ids=Bx8\nthreads: 1\n{extra}{timing}"
        )
        db = tmp_path / f"{task}.duckdb"
        proc = fwbench("sweep", str(spec), "--db", str(db), "--json", timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        records = {r["framework"]: r for r in json.loads(proc.stdout)}
        assert [r["status"] for r in records.values()] == ["ok", "ok"], [
            (r["framework"], r["error"]) for r in records.values()
        ]
        assert records["flax"]["param_count"] == records["torch"]["param_count"]
        assert not any(r["different_work"] for r in records.values()), records
        found[task] = records
    generated = found["generate"]
    tokens = {fw: r["settings"]["generated_tokens"] for fw, r in generated.items()}
    assert len(tokens["torch"]) == 8 and tokens["flax"] == tokens["torch"], tokens
    assert str(generated["flax"]["settings"]["token_check"]).startswith("passed")
    assert generated["flax"]["settings"]["jit_compilations"] == 2


# transformers' logits and greedy tokens for each folder (a PyTorch process: the JAX one
# below never imports PyTorch); the variants are configurations the built-in sizes do
# not reach (sliding windows, biases, unrotated layers, Llama 3's rotary base and Llama
# 3.1's scaling of it, a linear scaling, Gemma 3's two rotary bases, Gemma's layers
# without layer_types).
DECODER_VARIANTS = {
    "mistral-window": ("mistral", {"sliding_window": 4}),
    "qwen2-window": (
        "qwen2", {"use_sliding_window": True, "sliding_window": 4, "max_window_layers": 1}
    ),
    "smollm3-unrotated": ("smollm3", {"no_rope_layers": [1, 0]}),
    "llama-biases": ("llama", {"attention_bias": True, "mlp_bias": True}),
    "qwen3-biases": ("qwen3", {"attention_bias": True}),
    "llama-theta": ("llama", {"rope_theta": 500000.0}),
    "llama-3.1-rope": ("llama", {"rope_parameters": {
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 32}}),
    "qwen2-linear-rope": ("qwen2", {"rope_parameters": {
        "rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}}),
    "gemma2-window": ("gemma2", {"sliding_window": 4}),
    "gemma3-two-ropes": ("gemma3", {
        "sliding_window": 4, "layer_types": ["sliding_attention", "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}),
    # As published before transformers 5: no layer_types, so the sliding layers (and Gemma
    # 3's local rotary base) follow from each family's rule.
    "gemma2-published": ("gemma2", {"sliding_window": 4, "unwritten": ["layer_types"]}),
    "gemma3-published": ("gemma3", {
        "sliding_window": 4, "sliding_window_pattern": 2, "num_hidden_layers": 3,
        "unwritten": ["layer_types"]}),
}  # fmt: skip
# Every family the models' table says Flax runs, by fwbench's name for its sizes.
DECODER_FAMILIES = [name for name, a in hf.ARCHS.items() if (a.model_type or name) in hf.FLAX]
PROMPT = [5, 17, 200, 33, 90, 7, 64, 301]
NEW_TOKENS = 12

TRANSFORMERS_SIDE = """
import json, sys
from pathlib import Path
import torch, transformers
from fwbench.models.sources import hf
root, variants = Path(sys.argv[1]), json.loads(sys.argv[2])
folders = {f: hf.weights_folder(f + "@tiny") for f in json.loads(sys.argv[3])}
for name, (arch, extra) in variants.items():
    unwritten = extra.pop("unwritten", [])
    kind = hf.ARCHS[arch].model_type or arch
    config = transformers.AutoConfig.for_model(kind, **{**hf.ARCHS[arch].config("tiny"), **extra})
    model = transformers.AutoModelForCausalLM.from_config(config)
    config.architectures = [type(model).__name__]
    # A folder with its weights is read as it is: its config.json as published.
    (model if unwritten else config).save_pretrained(root / name)
    written = json.loads((root / name / "config.json").read_text())
    for key in unwritten:
        del written[key]
    (root / name / "config.json").write_text(json.dumps(written))
    folders[name] = hf.weights_folder(str(root / name))
ids = torch.tensor([json.loads(sys.argv[4])])
found = {}
for name, folder in folders.items():
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(ids).logits[0].tolist()
        made = model.generate(ids, max_new_tokens=int(sys.argv[5]), min_new_tokens=int(sys.argv[5]),
                              do_sample=False)
    tokens = made[0, ids.shape[1]:].tolist()
    found[name] = {"folder": str(folder), "logits": logits, "tokens": tokens}
print(json.dumps(found))
"""

FLAX_SIDE = """
import json, sys
from pathlib import Path
import jax.numpy as jnp, numpy as np
from fwbench.models import flax_llama
given = json.loads(sys.stdin.read())
ids, new = jnp.array([json.loads(sys.argv[1])]), int(sys.argv[2])
found = {}
for name, reference in given.items():
    model = flax_llama.load(Path(reference["folder"]))
    worst = float(np.max(np.abs(np.asarray(model(ids)[0]) - np.array(reference["logits"]))))
    cache = model.empty_cache(1, ids.shape[1] + new, jnp.float32)
    logits, cache = model.forward(ids, 0, cache, last_only=True)
    tokens = []
    for i in range(new):
        tokens.append(int(jnp.argmax(logits[0, -1])))
        logits, cache = model.forward(jnp.array([[tokens[-1]]]), ids.shape[1] + i, cache, True)
    found[name] = {"worst": worst, "tokens": tokens}
print(json.dumps(found))
"""


def test_flax_decoders_of_the_llama_family_compute_transformers_logits_and_tokens(
    tmp_path: Path,
) -> None:
    """Each family Flax's decoder reads (Llama, Mistral, Qwen 2 and 3, Gemma 1 to 3,
    Phi-3, SmolLM3) and the options the tiny sizes leave out (scaled rotary positions among
    them): the logits of a prompt are
    transformers' to float32's rounding (measured: at most 3e-7), and twelve greedy
    tokens through the static cache are transformers' generate()'s, past a sliding
    window of 4 where one is set."""
    import subprocess
    import sys

    def python(script: str, *args: str, given: str = "") -> dict:
        proc = subprocess.run(
            [sys.executable, "-c", script, *args],
            input=given, capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    prompt, new = json.dumps(PROMPT), str(NEW_TOKENS)
    variants, families = json.dumps(DECODER_VARIANTS), json.dumps(DECODER_FAMILIES)
    reference = python(TRANSFORMERS_SIDE, str(tmp_path), variants, families, prompt, new)
    flax = python(FLAX_SIDE, prompt, new, given=json.dumps(reference))
    assert len(DECODER_FAMILIES) == len(hf.FLAX) == 9
    assert set(flax) == {*DECODER_FAMILIES, *DECODER_VARIANTS}
    for name, found in flax.items():
        assert found["worst"] < 1e-5, (name, found["worst"])
        assert found["tokens"] == reference[name]["tokens"], name
    # The window and the scaling are in effect: the tokens are not those of the same
    # weights without them.
    assert flax["mistral-window"]["tokens"] != flax["mistral"]["tokens"]
    assert reference["llama-3.1-rope"]["logits"] != reference["llama-theta"]["logits"]


def test_flax_decoder_reads_rotary_positions_where_transformers_writes_them_or_refuses() -> None:
    """transformers 5 writes the rotary positions' settings in `rope_parameters`, older
    checkpoints as `rope_theta` and `rope_scaling`: both are read; what the decoder would
    compute otherwise is refused with the reason (before any work: sources/hf.py)."""
    from fwbench.models.llama_family import Config, Rope

    tiny = {"model_type": "llama", **hf.ARCHS["llama"].config("tiny")}
    now = {**tiny, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}}
    assert Config.of(now).rope.theta == Config.of({**tiny, "rope_theta": 5e5}).rope.theta == 5e5
    assert Config.of(tiny).rope.theta == 10000.0
    scaled = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
              "original_max_position_embeddings": 32}  # fmt: skip
    hub = Config.of({**tiny, "rope_theta": 5e5, "rope_scaling": {"rope_type": "llama3", **scaled}})
    written = {**tiny, "rope_parameters": {"rope_type": "llama3", "rope_theta": 5e5, **scaled}}
    assert hub.rope == Config.of(written).rope
    assert hub.rope.kind == "llama3" and hub.rope.get("factor") == 8.0
    # Gemma 3's two bases, as transformers 5 writes them and as the Hub's checkpoints do.
    gemma3 = {"model_type": "gemma3_text", **hf.ARCHS["gemma3"].config("tiny")}
    hub = Config.of({**gemma3, "rope_parameters": None, "rope_theta": 1e6,
                     "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                     "rope_local_base_freq": 1e4})  # fmt: skip
    written = Config.of({**gemma3, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}})  # fmt: skip
    assert (hub.rope, hub.local_rope) == (written.rope, written.local_rope)
    assert written.rope.kind == "linear" and written.local_rope == Rope(1e4)
    refused = {
        "no yarn rotary positions": {
            **tiny, "rope_parameters": {"rope_theta": 5e5, "rope_type": "yarn", "factor": 4.0}
        },
        "no dynamic rotary": {**tiny, "rope_scaling": {"type": "dynamic", "factor": 4.0}},
        "llama3 rotary positions without low_freq_factor": {
            **tiny, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}
        },
        "0.5 of each": {**tiny, "rope_parameters": {"partial_rotary_factor": 0.5}},
        "one per kind": {
            **tiny, "rope_parameters": {"sliding_attention": {"rope_theta": 1e4}}
        },
        "not of the Llama family": {**tiny, "model_type": "mixtral"},
        "no activation relu": {**tiny, "hidden_act": "relu"},
        "naming its layers": {**tiny, "use_sliding_window": True, "sliding_window": 4},
        "without a sliding_window": {**tiny, "layer_types": ["sliding_attention"] * 2},
    }  # fmt: skip
    for reason, config in refused.items():
        with pytest.raises(ValueError, match=reason):
            Config.of(config)


FLOPS_OF = """
import importlib, json, sys
from fwbench.case import Case
from fwbench.catalog.frameworks import get_framework

framework, mode = sys.argv[1:3]
module, _, name = get_framework(framework).adapter_path.partition(":")
adapter = getattr(importlib.import_module(module), name)()
adapter.configure("cpu", 1)
found = {}
for model, task, fields in (
    ("resnet18", "infer", {"input_size": 32, "num_classes": 10, "batch_size": 2}),
    ("resnet18", "train", {"input_size": 32, "num_classes": 10, "batch_size": 2}),
    ("mobilenet_v2", "train", {"input_size": 32, "num_classes": 10, "batch_size": 2}),
    ("gpt2_tiny", "train", {"batch_size": 2}),
    ("gpt2_tiny", "generate", {"batch_size": 1, "task_dims": "new_tokens=4"}),
):
    case = Case.build(framework=framework, mode=mode, model=model, task=task, threads=1, **fields)
    found[f"{model} {task}"] = adapter.count_flops(adapter.build(case))[0]
print(json.dumps(found))
"""


def test_flax_counts_the_flops_pytorch_counts(tmp_path: Path) -> None:
    """Flax's FLOPs are read from the program a step runs (its jaxpr): the same
    convolutions and products PyTorch's counter counts, to the FLOP in training and
    inference (strided convolutions' input gradients included), and within 1% for a
    generation (its static cache attends over every position it holds)."""
    import subprocess
    import sys

    found = {}
    for framework, mode in (("torch", "compile"), ("flax", "eager")):
        proc = subprocess.run(
            [sys.executable, "-c", FLOPS_OF, framework, mode],
            capture_output=True, text=True, timeout=600, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        found[framework] = json.loads(proc.stdout.strip().splitlines()[-1])
    torch, flax = found["torch"], found["flax"]
    generate = "gpt2_tiny generate"
    assert {k: v for k, v in flax.items() if k != generate} == {
        k: v for k, v in torch.items() if k != generate
    }
    assert flax[generate] == pytest.approx(torch[generate], rel=0.01)
