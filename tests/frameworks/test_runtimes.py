"""The inference runtimes for real (ONNX Runtime, OpenVINO): the torch model exported, run
beside PyTorch, checked for the same work (parameters of the source model, FLOPs read from
the graph, outputs compared numerically, the runtime's fusions checked), and refused up
front for what they cannot do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwbench.case import Case
from fwbench.errors import SpecError
from tests.conftest import fwbench

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")
RUNTIMES = ("onnxruntime", "openvino")

TINY = ["--batch-size", "2", "--input-size", "32", "--num-classes", "10", "--threads", "2"]


def test_resnet18_runs_beside_torch_with_the_same_work(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    frameworks = [a for fw in ("torch", *RUNTIMES) for a in ("--framework", fw)]
    proc = fwbench(
        "run", *frameworks, "--model", "resnet18", "--task", "infer", *TINY,
        "--max-time", "0.3", "--min-runs", "1", "--max-runs", "1", "--db", str(db), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = {r["framework"]: r for r in json.loads(proc.stdout)}
    torch = records["torch"]
    for name, mode in zip(RUNTIMES, ("optimized", "latency"), strict=True):
        runtime = records[name]
        assert runtime["status"] == "ok", runtime["error"]
        assert runtime["mode"] == mode  # its default: the first of its modes
        settings = runtime["settings"]
        assert settings["intra_op_threads"] == 2
        assert settings["export_s"] > 0 and settings["compile_s"] > 0
        assert settings["output_check"] == "agrees" and settings["output_max_rel_error"] < 1e-3
        # Parameters are the source model's: PyTorch's trainable count. The exported graph
        # holds fewer numbers, BatchNorm being folded into the convolutions.
        counts = runtime["parity"]["counts"]
        assert counts[name] == counts["torch"] == settings["source_params"]
        assert settings["graph_params"] < settings["source_params"]
        assert not any("different work" in w for w in runtime["warnings"])
        # Exported as a user deploys it, and run with every BatchNorm fused.
        assert settings["exporter"].startswith("torch.onnx.export(dynamo=True, optimize=True)")
        assert settings["source_batchnorms"] == 20 and settings["graph_batchnorms"] == 0
        assert settings["fusion_check"].startswith("passed"), settings["fusion_check"]
        assert 0 < settings["optimized_nodes"] <= settings["graph_nodes"]
        assert "BatchNormalization" not in settings["optimized_ops"]
        assert not runtime["different_work"]
        # FLOPs from the graph's convolutions and products: PyTorch's count.
        assert runtime["work"]["counter"].startswith("ONNX graph")
        assert runtime["work"]["flops_per_step"] == pytest.approx(
            torch["work"]["flops_per_step"], rel=1e-6
        )
        assert runtime["environment"][name]
    ort, ov = records["onnxruntime"]["settings"], records["openvino"]["settings"]
    assert ort["graph_optimization_level"] == "ORT_ENABLE_ALL"
    assert ort["execution_mode"] == "ORT_SEQUENTIAL"
    # fp32 means fp32: OpenVINO's CPU plugin would pick bf16 on a CPU that has it.
    assert ov["ov_inference_precision_hint"] == "f32"
    assert ov["ov_performance_hint"] == "LATENCY" and ov["ov_inference_num_threads"] == 2


def test_openvino_bf16_is_run_or_recorded_unsupported(tmp_path: Path) -> None:
    """Whether this CPU has bf16 kernels decides which; never a silent fp32 run."""
    proc = fwbench(
        "run", "--framework", "openvino", "--model", "resnet18", "--task", "infer", *TINY,
        "--precision", "bf16", "--max-time", "0.3", "--min-runs", "1", "--max-runs", "1",
        "--db", str(tmp_path / "r.duckdb"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    if record["status"] == "unsupported":
        assert "lacks bf16 kernels" in record["error"]
    else:
        assert record["status"] == "ok", record["error"]
        assert record["settings"]["ov_inference_precision_hint"] == "bf16"
        assert record["settings"]["output_check"] == "agrees"


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_what_it_cannot_do_is_refused_before_any_work(tmp_path: Path, runtime: str) -> None:
    db = tmp_path / "r.duckdb"
    base = ["run", "--framework", runtime, "--model", "resnet18", *TINY, "--db", str(db)]
    for extra, reason in (
        (["--task", "train"], "cannot train: it is an inference runtime"),
        (["--task", "infer", "--layout", "channels_last"], "runs channels_first only"),
        (["--task", "infer", "--precision", "fp16"], f"valid choices for {runtime}: fp32"),
    ):
        proc = fwbench(*base, *extra)
        assert proc.returncode == 2, proc.stderr
        assert reason in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not db.exists()
    with pytest.raises(SpecError, match=f"valid choices for {runtime}: "):
        Case.build(framework=runtime, model="resnet18", task="infer", mode="eager")


def test_an_export_whose_outputs_differ_is_flagged() -> None:
    import onnxruntime as ort
    import torch

    from fwbench.frameworks.onnx_graph import agreement, export, graph_flops, graph_params

    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    other = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
    inputs = (torch.randn(5, 8),)
    proto = export(other, inputs)
    assert graph_params(proto) == 8 * 4 + 4 + 4 * 3 + 3
    assert graph_flops(proto) == 2 * 5 * (8 * 4 + 4 * 3)
    session = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {session.get_inputs()[0].name: inputs[0].numpy()}
    assert agreement(other, inputs, lambda: session.run(None, feeds)[0])["output_check"] == "agrees"
    found = agreement(model, inputs, lambda: session.run(None, feeds)[0])
    assert found["output_check"] == "differs"
    assert "outputs differ from PyTorch's" in found["warnings"][0]


def test_openvino_offers_the_cpu_only(tmp_path: Path) -> None:
    db = tmp_path / "r.duckdb"
    proc = fwbench(
        "run", "--framework", "openvino", "--model", "resnet18", "--task", "infer",
        "--device", "cuda", *TINY, "--db", str(db),
    )  # fmt: skip
    assert proc.returncode == 2 and "cannot run on 'cuda'" in proc.stderr
    assert not db.exists()


def test_onnxruntime_names_its_execution_provider_in_the_case() -> None:
    """cpu: the CPU provider; cuda: CUDA's, or TensorRT's in mode tensorrt, with fp32 meaning
    IEEE fp32 and cuDNN's search following the case's autotune."""
    from fwbench.frameworks.onnxruntime import providers

    def made(**given: object) -> Case:
        return Case.build(framework="onnxruntime", model="resnet18", task="infer", **given)

    assert providers(made()) == [("CPUExecutionProvider", {})]
    [(name, cuda)] = providers(made(device="cuda"))
    assert name == "CUDAExecutionProvider"
    assert cuda["use_tf32"] == "0" and cuda["cudnn_conv_algo_search"] == "HEURISTIC"
    [(_, cuda)] = providers(made(device="cuda", precision="tf32", autotune=True))
    assert cuda["use_tf32"] == "1" and cuda["cudnn_conv_algo_search"] == "EXHAUSTIVE"
    chain = providers(made(device="cuda", mode="tensorrt", precision="tf32"))
    assert [n for n, _ in chain] == ["TensorrtExecutionProvider", "CUDAExecutionProvider"]
    for given, reason in (
        ({"mode": "tensorrt", "precision": "tf32"}, "mode: tensorrt runs on cuda only"),
        ({"device": "cuda", "mode": "tensorrt"}, "precision: fp32 in mode tensorrt: TensorRT"),
        ({"precision": "tf32"}, "tf32 is a tensor-core mode of NVIDIA GPUs"),
    ):
        with pytest.raises(SpecError, match=reason):
            made(**given)


def test_onnxruntime_on_cuda_without_its_gpu_provider_is_recorded_unsupported(
    tmp_path: Path,
) -> None:
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    proc = fwbench(
        "run", "--framework", "onnxruntime", "--model", "resnet18", "--task", "infer",
        "--device", "cuda", *TINY, "--db", str(tmp_path / "r.duckdb"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["status"] == "unsupported"
    assert "no CUDA execution provider" in record["error"]
    assert "install onnxruntime-gpu" in record["error"]


def test_the_runtimes_serve_under_loadgen_like_any_framework(tmp_path: Path) -> None:
    """`fwbench serve` takes the exported graph behind MLPerf LoadGen, with its outputs
    checked against PyTorch's before the first query."""
    pytest.importorskip("mlperf_loadgen")
    frameworks = [a for fw in RUNTIMES for a in ("--framework", fw)]
    proc = fwbench(
        "serve", *frameworks, "--model", "resnet18", *TINY, "--scenario", "single_stream",
        "--runs", "1", "--duration", "0.3", "--db", str(tmp_path / "r.duckdb"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    records = {r["framework"]: r for r in json.loads(proc.stdout)}
    assert set(records) == set(RUNTIMES)
    for name, r in records.items():
        assert r["status"] == "ok" and r["serving"]["validity"] == "VALID", (name, r["error"])
        assert r["param_count"] == 11_181_642  # ResNet-18 at 10 classes: the source model's
        assert r["settings"]["output_check"] == "agrees" and r["settings"]["export_s"] > 0
        assert r["serving"]["latency_s"]["90.00"]["value"] > 0
