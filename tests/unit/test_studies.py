"""Study presets expand, and the studies' claims evaluate to each of the four outcomes on
synthetic results (run-level noise as real machines have it)."""

from __future__ import annotations

import itertools
from importlib import resources
from typing import Any

import pytest

from fwbench.case import Case
from fwbench.launch.records import measurement_of
from fwbench.measure.energy import Energy
from fwbench.models.parity import check as parity
from fwbench.result import Result
from fwbench.studies.claims import Claim, evaluate, evaluate_claim, load_study, studies
from fwbench.sweep import load_preset, presets

from .test_parity_and_summary import result, runs_of

_ids = itertools.count()


def measured(medians: list[float], status: str = "ok", **case: Any) -> Result:
    """A result of runs with these medians (seconds per step) for the case given."""
    base = result("torch", "eager", 0.1, 0.001, status)
    fields = {"model": "resnet18", "threads": 2, **case}
    m = measurement_of(runs_of(medians), "max_runs") if status == "ok" else None
    return base.model_copy(
        update={"case": Case.build(**fields), "measurement": m, "result_id": str(next(_ids))}
    )


def test_every_study_loads_and_every_study_preset_expands() -> None:
    names = studies()
    assert {"asu", "dai"} <= set(names)
    for name in names:
        assert load_study(name).claims
    # A preset of models of the user's kind (hf:...) is made ready by describing them in
    # a worker: test_a_preset_of_decoders_names_models_every_one_of_its_frameworks_runs.
    named = {p: load_preset(p) for p in presets() if p not in USER_MODEL_PRESETS}
    for preset, sweep in named.items():
        assert sweep.cases, preset
        assert sweep.study is None or sweep.study in names
    assert {p for p, s in named.items() if s.study == "asu"} >= {
        "asu-train", "asu-train-small", "asu-infer", "asu-infer-cpu", "asu-infer-small",
        "asu-parallel", "asu-parallel-small",
    }  # fmt: skip
    assert named["dai"].study == named["seven-networks"].study == "dai"


USER_MODEL_PRESETS = {"llm-families-cpu", "keras3"}


def test_a_preset_of_decoders_names_models_every_one_of_its_frameworks_runs() -> None:
    """Its cases are made by `fwbench sweep` once a worker has described each model (too
    slow here): what can be checked without one is that each model resolves and each
    framework named runs it."""
    import yaml

    from fwbench.catalog.sources import source_of

    for preset in USER_MODEL_PRESETS:
        text = resources.files("fwbench.presets").joinpath(f"{preset}.yaml").read_text()
        data = yaml.safe_load(text)
        for model in data["model"]:
            source = source_of(model)
            assert source is not None, model
            spec = source.resolve(model)
            for framework in data["framework"]:
                runs, why = source.can(framework, spec)
                assert runs, (model, framework, why)


FASTER = Claim(
    id="t",
    published="PyTorch is faster",
    kind="faster",
    axis="framework",
    a="torch",
    b="tensorflow",
    where={"task": "infer"},
)


def pair(torch: list[float], tf: list[float], **case: Any) -> list[Result]:
    return [
        measured(torch, framework="torch", task="infer", **case),
        measured(tf, framework="tensorflow", mode="graph", task="infer", **case),
    ]


def test_a_faster_claim_takes_each_of_the_four_outcomes() -> None:
    # A 3% process offset between runs, as on a noisy machine.
    agrees = evaluate_claim(FASTER, pair([0.100, 0.103, 0.097], [0.130, 0.134, 0.127]))
    assert agrees.outcome == "agrees" and "1 of 1 agree" in agrees.here
    disagrees = evaluate_claim(FASTER, pair([0.130, 0.134, 0.127], [0.100, 0.103, 0.097]))
    assert disagrees.outcome == "disagrees" and "tensorflow 1.30x faster" in disagrees.here
    same = evaluate_claim(FASTER, pair([0.1000, 0.1001, 0.0999], [0.1000, 0.1001, 0.0999]))
    assert same.outcome == "disagrees" and "equivalent" in same.here
    unsure = evaluate_claim(FASTER, pair([0.100, 0.120, 0.085], [0.104, 0.125, 0.090]))
    assert unsure.outcome == "inconclusive"
    nothing = evaluate_claim(FASTER, pair([0.1], [0.2], device="cpu")[:1])
    assert nothing.outcome == "not measured here" and "no pair" in nothing.reason
    gpu = FASTER.model_copy(update={"where": {"task": "infer", "device": "cuda"}})
    assert evaluate_claim(gpu, pair([0.1], [0.2])).reason == (
        "no result matches task infer, device cuda, framework torch and tensorflow"
    )
    oom = [measured([], "oom", framework="torch", task="infer")]
    assert "ended oom" in evaluate_claim(FASTER, oom).reason


def test_pairs_doing_different_work_are_left_out_with_the_reason() -> None:
    results = pair([0.130, 0.134, 0.127], [0.100, 0.103, 0.097])
    mismatch = parity({"torch": 138_400_000, "tensorflow": 44_000_000})
    results = [r.model_copy(update={"parity": mismatch}) for r in results]
    found = evaluate_claim(FASTER, results)
    # Not the same model: neither for nor against the claim, and the reason says so.
    assert found.outcome == "inconclusive" and found.here == "no pair does the same work"
    assert "resnet18 at 224px c1000 is different work in the two" in found.reason
    assert "DIFFERENT WORK" in found.reason and found.reason.endswith("left out")
    same_work = pair([0.100, 0.103, 0.097], [0.130, 0.134, 0.127], batch_size=8)
    assert evaluate_claim(FASTER, results + same_work).outcome == "agrees"


def test_a_pair_whose_side_failed_is_undecided_not_left_out() -> None:
    """PyTorch ran out of memory on two networks where TensorFlow ran: "PyTorch is faster"
    agreed on the one network both ran, with no word of the other two."""
    fast, slow = [0.100, 0.103, 0.097], [0.130, 0.134, 0.127]
    results = pair(fast, slow)
    for batch in (64, 128):
        results += [
            measured([], "oom", framework="torch", task="infer", batch_size=batch),
            measured(slow, framework="tensorflow", mode="graph", task="infer", batch_size=batch),
        ]
    found = evaluate_claim(FASTER, results)
    assert found.outcome == "inconclusive", found
    assert found.here.startswith("1 of 3 agree, 0 disagree, 2 inconclusive")
    assert "resnet18 infer b64 224px c1000 (eager vs graph): torch/eager ended oom" in found.here
    assert found.reason.count("ended oom: not decided") == 2
    # Both sides failed: not a pair measured, named, and the claim rests on the others.
    both = [
        *pair(fast, slow),
        measured([], "oom", framework="torch", task="infer", batch_size=64),
        measured([], "error", framework="tensorflow", mode="graph", task="infer", batch_size=64),
    ]
    found = evaluate_claim(FASTER, both)
    assert found.outcome == "agrees" and found.here.startswith("1 of 1 agree")
    assert "torch/eager ended oom, tensorflow/graph ended error: not decided" in found.reason


def test_the_per_sample_trend_claim_reads_run_level_values() -> None:
    claim = load_study("asu").claims[3]
    assert claim.kind == "falls_with_batch"
    falling = [
        measured([t * 0.98, t, t * 1.02], framework="torch", task="infer", batch_size=b)
        for b, t in ((1, 0.010), (8, 0.040), (16, 0.070))
    ]
    assert evaluate_claim(claim, falling).outcome == "agrees"
    rising = [
        measured([t * 0.98, t, t * 1.02], framework="torch", task="infer", batch_size=b)
        for b, t in ((1, 0.010), (8, 0.100), (16, 0.250))
    ]
    assert evaluate_claim(claim, rising).outcome == "disagrees"


def test_power_without_a_counter_is_not_measured_here() -> None:
    claim = load_study("asu").claims[4]
    assert claim.kind == "flat_with_batch"
    none = Energy(status="unavailable", reason="no NVML device")
    results = [
        measured([0.01], framework="torch", task="infer", batch_size=b, device="cuda")
        for b in (1, 8)
    ]
    found = evaluate_claim(claim, [r.model_copy(update={"energy": none}) for r in results])
    assert found.outcome == "not measured here" and "no NVML device" in found.reason
    watts = [
        r.model_copy(
            update={"energy": Energy(status="measured", average_power_w=w, joules_per_sample=1)}
        )
        for r, w in zip(results, (200.0, 205.0), strict=True)
    ]
    assert evaluate_claim(claim, watts).outcome == "agrees"


SCALES = next(c for c in load_study("asu").claims if c.kind == "scales_near_linearly")


def ddp(medians: list[float], world_size: int, status: str = "ok", **case: Any) -> Result:
    """A DDP training result on a 2-core host (one thread per process unless given)."""
    fields = {"threads": 1, "device": "cpu", **case}
    r = measured(
        medians, status, framework="torch", task="train", strategy="ddp",
        world_size=world_size, **fields,
    )  # fmt: skip
    return r.model_copy(update={"environment": {"host": {"cpu_physical_cores": 2}}})


BASE = [0.100, 0.103, 0.097]  # seconds per step at 1 replica, a 3% process offset


def test_the_scaling_claim_takes_each_of_the_four_outcomes() -> None:
    assert SCALES.where == {"strategy": "ddp", "task": "train"} and SCALES.threshold == 0.90
    assert "at least 90%" in SCALES.published
    agrees = evaluate_claim(SCALES, [ddp(BASE, 1), ddp([0.101, 0.104, 0.098], 2)])
    assert agrees.outcome == "agrees" and agrees.reason == ""
    assert agrees.here.startswith("1 of 1 at least 90% efficient, 0 below, 0 inconclusive; ")
    assert "torch/eager/ddp resnet18 b32/replica 224px c1000 cpu, 2 vs 1 replica" in agrees.here
    # 0.71 (0.67-0.76): below the threshold; the CPU replicas share the host, and say so.
    slow = evaluate_claim(SCALES, [ddp(BASE, 1), ddp([0.140, 0.144, 0.136], 2)])
    assert slow.outcome == "disagrees" and "efficiency 0.71 (0.6" in slow.here
    assert slow.reason.startswith("on the CPU the 2 replicas are 2 process(es) x 1 thread(s)")
    assert "2 physical cores" in slow.reason
    # 0.93 with an interval straddling 0.90: a rerun could go either way.
    unsure = evaluate_claim(SCALES, [ddp(BASE, 1), ddp([0.108, 0.111, 0.105], 2)])
    assert unsure.outcome == "inconclusive" and "efficiency 0.93 (0.8" in unsure.here
    alone = evaluate_claim(SCALES, [ddp(BASE, 1), ddp([], 2, "oom")])
    assert alone.outcome == "not measured here" and alone.reason == (
        "no pair of 1 and more replicas of strategy ddp, task train: nothing measured at "
        "more than 1 (2 replicas ended oom)"
    )
    plain = evaluate_claim(SCALES, pair(BASE, BASE))
    assert plain.reason == "no result matches strategy ddp, task train"


def test_the_scaling_claim_pairs_like_the_scaling_table() -> None:
    # On the CPU the threads per process must match (1 x 2 threads against 2 x 1 thread
    # is the same two cores, not twice the resources), and the reason names the field.
    split = evaluate_claim(SCALES, [ddp(BASE, 1, threads=2), ddp(BASE, 2, threads=1)])
    assert split.outcome == "not measured here"
    assert split.reason.endswith("1 and more replicas differ in threads 2 vs 1")
    # 2 processes x 2 threads on 2 cores: oversubscribed, and the outcome says why.
    crowded = [ddp(BASE, 1, threads=2), ddp([0.190, 0.196, 0.184], 2, threads=2)]
    found = evaluate_claim(SCALES, crowded)
    assert found.outcome == "disagrees"
    assert found.reason == (
        "the CPU is oversubscribed: 2 process(es) x 2 thread(s) on 2 physical cores, "
        "so the 2 replicas share cores"
    )
    # On GPUs threads are the host's, split among DDP's processes by default: paired.
    gpus = [ddp(BASE, 1, threads=8, device="cuda"), ddp(BASE, 2, threads=4, device="cuda")]
    found = evaluate_claim(SCALES, gpus)
    assert found.outcome == "agrees" and "host threads 8 vs 4/process" in found.here
    assert found.reason == ""


def test_a_study_evaluates_every_claim_on_a_cpu_only_result_set() -> None:
    found = evaluate(load_study("asu"), pair([0.100, 0.103, 0.097], [0.080, 0.082, 0.078]))
    by_id = {f.claim.id: f for f in found}
    assert by_id["infer-cpu"].outcome == "agrees"
    assert by_id["train-pytorch"].outcome == "not measured here"
    assert by_id["ddp-beats-dp"].outcome == "not measured here"
    assert by_id["ddp-scales"].outcome == "not measured here"


@pytest.mark.parametrize("name", ["nope"])
def test_an_unknown_study_is_one_line_with_the_choices(name: str) -> None:
    from fwbench.errors import SpecError

    with pytest.raises(SpecError, match="unknown study 'nope'; valid choices: asu, dai"):
        load_study(name)


def test_a_report_finds_the_study_of_the_preset_that_made_the_results() -> None:
    from fwbench.cli.report import study_of

    assert study_of(["fwbench sweep --preset asu-infer-small --db r.duckdb"]) == "asu"
    assert study_of(["fwbench sweep --preset=dai", "fwbench run --model resnet18"]) == "dai"
    assert study_of(["fwbench sweep --preset quick", "fwbench sweep my.yaml"]) is None
    assert (
        study_of(["fwbench sweep --preset asu-infer-small", "fwbench sweep --preset dai"]) is None
    )
    assert study_of(["fwbench sweep --preset 'unclosed"]) is None


def test_a_published_ratio_is_set_beside_each_pairs_interval() -> None:
    # PyTorch about 1.30x faster here (1.25-1.35 or so).
    results = pair([0.100, 0.103, 0.097], [0.130, 0.134, 0.127])
    inside = FASTER.model_copy(update={"published_ratio": 1.3})
    found = evaluate_claim(inside, results)
    assert found.outcome == "agrees"
    assert "published torch 1.30x faster: inside this interval" in found.here
    above = evaluate_claim(FASTER.model_copy(update={"published_ratio": 2.45}), results)
    assert "published torch 2.45x faster: above this interval" in above.here
    # The other side won here: the published speed-up of `a` lies above an interval
    # below 1, and the claim disagrees in direction.
    flipped = evaluate_claim(inside, pair([0.130, 0.134, 0.127], [0.100, 0.103, 0.097]))
    assert flipped.outcome == "disagrees"
    assert "published torch 1.30x faster: above this interval" in flipped.here
    below = evaluate_claim(FASTER.model_copy(update={"published_ratio": 1.05}), results)
    assert "1.05x faster: below this interval" in below.here


def test_the_keras3_study_sets_the_published_ratios_beside_its_claims() -> None:
    study = load_study("keras3")
    ratios = {c.id: c.published_ratio for c in study.claims}
    assert ratios["gemma-generate-jax"] == 2.45
    assert all(c.published_ratio for c in study.claims)
    # Published 1.02x: as "faster" a faithful reproduction could never agree.
    assert {c.id for c in study.claims if c.kind != "faster"} == {"mistral-fit-jax"}
    # On a CPU-only result set every claim (a GPU's decoders) is not measured here.
    found = evaluate(study, pair([0.1, 0.1, 0.1], [0.2, 0.2, 0.2]))
    assert {f.outcome for f in found} == {"not measured here"}


def _steady(t: float, **case: Any) -> Result:
    return measured([t * 0.99, t, t * 1.01, t * 1.005, t * 0.995], **case)


def test_a_framework_claim_pairs_equal_threads_and_the_studys_own_modes() -> None:
    """TensorFlow faster at 1 thread and at 4 threads: the claim agrees, never pairing
    PyTorch at 4 threads with TensorFlow at 1; TensorFlow eager beside its graph mode
    does not stand in for the graph mode the study ran."""
    claim = {c.id: c for c in load_study("asu").claims}["infer-cpu"]
    cpu = {"task": "infer", "device": "cpu"}
    results = [
        _steady(0.4, framework="torch", threads=1, **cpu),
        _steady(0.1, framework="torch", threads=4, **cpu),
        _steady(0.08, framework="tensorflow", mode="graph", threads=4, **cpu),
        _steady(0.3, framework="tensorflow", mode="graph", threads=1, **cpu),
        _steady(0.9, framework="tensorflow", mode="eager", threads=1, **cpu),
    ]
    found = evaluate_claim(claim, results)
    assert found.outcome == "agrees" and "2 of 2 agree" in found.here
    assert "(graph vs eager)" in found.here


def test_a_side_measured_two_ways_pairs_each_way() -> None:
    torch = _steady(0.1, framework="torch", task="infer")
    graph = _steady(0.13, framework="tensorflow", mode="graph", task="infer")
    eager = _steady(0.08, framework="tensorflow", mode="eager", task="infer")
    found = evaluate_claim(FASTER, [torch, graph, eager])
    assert found.outcome == "disagrees" and "1 of 2 agree, 1 disagree" in found.here
    assert "(eager vs eager)" in found.here


def test_the_trend_reads_each_precision_as_its_own_curve() -> None:
    claim = {c.id: c for c in load_study("asu").claims}["per-sample-trend"]
    base = {"framework": "torch", "task": "infer", "device": "cpu", "threads": 2}
    results = [
        _steady(0.010, batch_size=1, **base),
        _steady(0.040, batch_size=8, **base),
        _steady(0.002, batch_size=1, precision="bf16", **base),
        _steady(0.012, batch_size=8, precision="bf16", **base),
    ]
    found = evaluate_claim(claim, results)
    assert found.outcome == "agrees" and "2 of 2 curves fall" in found.here
    assert "bf16" in found.here


def test_a_claim_about_most_networks_agrees_when_more_than_half_do() -> None:
    claim = {c.id: c for c in load_study("dai").claims}["graph-little-effect"]
    assert claim.most

    def network(model: str, graph: float, eager: float) -> list[Result]:
        case = {"framework": "tensorflow", "task": "train", "model": model}
        return [_steady(graph, mode="graph", **case), _steady(eager, mode="eager", **case)]

    same = network("resnet50", 0.10, 0.101) + network("vgg16", 0.20, 0.203)
    lstm = network("lstm_lm_cell", 0.10, 0.30)
    assert evaluate_claim(claim, same + lstm).outcome == "agrees"
    assert evaluate_claim(claim, same[:2] + lstm).outcome == "disagrees"
    every = claim.model_copy(update={"most": False})
    assert evaluate_claim(every, same + lstm).outcome == "disagrees"


def test_autotuning_is_claimed_for_the_convolutional_networks_only() -> None:
    claim = {c.id: c for c in load_study("dai").claims}["autotune-matters"]
    gpu = {"framework": "torch", "task": "train", "device": "cuda"}
    results = [
        _steady(0.10, model="resnet50", **gpu),
        _steady(0.08, model="resnet50", autotune=True, **gpu),
        _steady(0.10, model="bert_base", **gpu),
        _steady(0.10, model="bert_base", autotune=True, **gpu),
    ]
    assert evaluate_claim(claim, results).outcome == "agrees"


def test_a_claim_reads_the_band_its_results_were_recorded_under() -> None:
    """3% apart, recorded under a ±5% band: the verdict table says equivalent, and so
    does the claim, unless the claim sets its own band."""
    results = pair([0.100, 0.1001, 0.0999], [0.103, 0.1031, 0.1029])
    wide = [
        r.model_copy(update={"reading": r.reading.model_copy(update={"band": 0.05})})
        for r in results
    ]
    assert evaluate_claim(FASTER, results).outcome == "agrees"
    assert "equivalent within ±5%" in evaluate_claim(FASTER, wide).here
    own = FASTER.model_copy(update={"band": 0.02})
    assert evaluate_claim(own, wide).outcome == "agrees"


def test_a_claim_naming_no_case_field_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no case field modle; valid choices: .*model"):
        Claim(id="x", published="-", kind="faster", axis="framework", where={"modle": "a"})


@pytest.mark.parametrize(
    ("what", "change", "says"),
    [
        ("an oom with a measurement", lambda r: r.update(status="oom", error="out of memory"),
         "a oom result has no measurement"),
        ("a block of no time", lambda r: r["samples"].__setitem__(0, -0.5),
         "every block's time per step must be above 0"),
        ("two runs of one round", lambda r: r["runs"][1].__setitem__("index", 0),
         "two runs of one index"),
        ("a run outside its interval", lambda r: r["runs"][0].update(ci_low_s=5.0, ci_high_s=6.0),
         "its interval must contain its median"),
        ("negative memory", lambda r: r.update(memory={
            "host_baseline_bytes": -5, "host_peak_bytes": 1, "host_framework_bytes": 6,
            "host_method": "rss"}), "host_baseline_bytes"),
    ],
)  # fmt: skip
def test_a_record_that_contradicts_itself_is_refused(what: str, change: Any, says: str) -> None:
    """A record read back (an import, a damaged file) that claims what cannot be: claims
    counted an oom holding a measurement as measured, a p25 over a negative block read
    nan, two runs of one round paired one run twice."""
    import copy

    from pydantic import ValidationError

    record = measured([0.1, 0.101, 0.099], framework="torch", task="infer").to_record()
    Result.from_record(copy.deepcopy(record))  # as made, it reads
    changed = copy.deepcopy(record)
    change(changed)
    with pytest.raises(ValidationError, match=says):
        Result.from_record(changed)
