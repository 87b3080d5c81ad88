"""The inference runtimes run the graph a user deploys (issue 30): torch.onnx's default
export, BatchNorm folded; the graph each runtime runs after its own optimisation is read
back and checked for the fusions a deployment expects; a graph without them is flagged as
different work; parameter parity comes from the source PyTorch model.

Real ONNX Runtime and OpenVINO on tiny models; PyTorch runs in this process (as in
test_runtimes.py), TensorFlow never does."""

from __future__ import annotations

import contextlib
import io
import warnings
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from fwbench.case import Case
from fwbench.frameworks import load_adapter
from fwbench.report.summary import summarise
from fwbench.result import Measurement, Result, StepTime
from fwbench.store.db import ResultStore
from tests.unit.test_parity_and_summary import START, runs_of

pytest.importorskip("onnxruntime")
pytest.importorskip("openvino")
torch = pytest.importorskip("torch")


class TinyCnn(torch.nn.Module):
    """Bias-free convolutions each followed by BatchNorm (the pattern the audit found
    unfused), a residual add and a classifier, as in a ResNet block."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, bias=False), nn.BatchNorm2d(8), nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Linear(8, 5)
        with torch.no_grad():  # statistics that are not the identity, so folding shows
            for bn in (self.stem[1], self.block[1]):
                bn.running_mean.uniform_(-1, 1)
                bn.running_var.uniform_(0.5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = torch.relu(y + self.block(y))
        return self.head(y.mean(dim=(2, 3)))


INPUTS = (torch.randn(2, 3, 16, 16),)


def _export_unoptimised(model: torch.nn.Module) -> Any:
    """The export fwbench made before issue 30: the exporter's optimiser off."""
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.onnx.export(model.eval(), INPUTS, dynamo=True, optimize=False).model_proto


def _case(mode: str) -> Case:
    return Case.build(framework="onnxruntime", model="resnet18", task="infer", mode=mode)


def test_the_export_folds_batchnorm_and_onnx_runtime_runs_it_fused() -> None:
    from fwbench.frameworks.onnx_graph import export, exporter, fusion_settings
    from fwbench.frameworks.onnxruntime import optimized_graph

    proto = export(TinyCnn(), INPUTS)
    assert exporter(proto).startswith("torch.onnx.export(dynamo=True, optimize=True), opset ")
    assert not any(n.op_type == "BatchNormalization" for n in proto.graph.node)
    for mode in ("optimized", "basic"):
        graph = optimized_graph(proto, _case(mode), threads=1)
        assert not isinstance(graph, str), graph
        assert "BatchNormalization" not in graph.ops and "Expand" not in graph.ops
        found = fusion_settings(graph, batchnorms=2)
        assert found["fusion_check"] == "passed: no BatchNormalization left after a convolution"
        assert found["optimized_nodes"] == len(graph.ops) and "warnings" not in found
    # ORT_DISABLE_ALL runs the graph as exported: nothing to expect of the runtime.
    off = fusion_settings(optimized_graph(proto, _case("unoptimized"), threads=1), batchnorms=2)
    assert off["fusion_check"].startswith("not applicable: mode unoptimized (ORT_DISABLE_ALL)")


def test_a_graph_whose_batchnorm_was_not_fused_is_flagged() -> None:
    """fwbench's export before issue 30: a run-time zero bias per convolution, which ONNX
    Runtime cannot fold, so every BatchNorm stays after its convolution even at
    ORT_ENABLE_ALL; the check says so, with a warning."""
    from fwbench.frameworks.onnx_graph import fusion_settings, onnx_runtime_graph
    from fwbench.frameworks.onnxruntime import optimized_graph

    unoptimised = _export_unoptimised(TinyCnn())
    assert fusion_settings(onnx_runtime_graph(unoptimised), 2)["fusion_check"] == (
        "failed: 2 BatchNormalization left after a convolution"
    )
    graph = optimized_graph(unoptimised, _case("optimized"), threads=1)
    assert not isinstance(graph, str), graph
    found = fusion_settings(graph, batchnorms=2)
    assert found["fusion_check"] == "failed: 2 BatchNormalization left after a convolution"
    assert "different work" in found["warnings"][0]
    # A BatchNorm with no convolution before it is no missed fusion.
    alone = torch.nn.Sequential(torch.nn.BatchNorm2d(3), torch.nn.Conv2d(3, 4, 3))
    assert onnx_runtime_graph(_export_unoptimised(alone)).unfused_batchnorms == 0


def test_openvino_checks_its_runtime_graph() -> None:
    """OpenVINO folds BatchNorm into the convolution even from the unoptimised export; a
    runtime graph that ran one as a layer of its own would fail the check."""
    import tempfile

    import onnx
    import openvino as ov

    from fwbench.frameworks.onnx_graph import conv_batchnorms, fusion_settings
    from fwbench.frameworks.openvino import _layer, openvino_runtime_graph

    unoptimised = _export_unoptimised(TinyCnn())
    expected = conv_batchnorms(unoptimised.graph)
    assert len(expected) == 2
    core = ov.Core()
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "m.onnx")
        onnx.save(unoptimised, path)
        compiled = core.compile_model(core.read_model(path), "CPU", {"INFERENCE_NUM_THREADS": 1})
    layers = [_layer(op) for op in compiled.get_runtime_model().get_ordered_ops()]
    graph = openvino_runtime_graph(layers, expected)
    assert "Convolution" in graph.ops and "Const" not in graph.ops
    assert fusion_settings(graph, 2)["fusion_check"].startswith("passed")
    # The same graph with the first BatchNorm run by an elementwise layer of its own.
    unfused = [*layers, ("Eltwise", f"Multiply_1,{expected[0]}")]
    assert fusion_settings(openvino_runtime_graph(unfused, expected), 2)["fusion_check"] == (
        "failed: 1 BatchNormalization left after a convolution"
    )


@pytest.mark.parametrize("runtime", ["onnxruntime", "openvino"])
def test_parameters_are_the_source_models_not_the_folded_graphs(runtime: str) -> None:
    from fwbench.frameworks.onnx_graph import export, graph_params
    from fwbench.frameworks.torch import count_trainable

    adapter = load_adapter(runtime)
    dims = {"input_size": 32, "num_classes": 10}
    model = adapter.build_model("resnet18", dims)
    assert isinstance(model, torch.nn.Module)  # the PyTorch model itself: no export
    count = adapter.count_params(model)
    assert count == 11_181_642 == count_trainable(model)
    # The folded graph holds fewer numbers (no BatchNorm scales and shifts of its own).
    assert graph_params(export(model, (torch.randn(1, 3, 32, 32),))) < count


def _inference(framework: str, mode: str, median: float, fusion_check: str = "") -> Result:
    """A measured inference result (three runs around `median`) with these settings."""
    case = Case.build(framework=framework, model="resnet18", task="infer", mode=mode, threads=1)
    spread = (0.99 * median, median, 1.01 * median)
    return Result(
        result_id=framework,
        invocation_id="r",
        recorded_at=datetime.now(),
        case=case,
        status="ok",
        measurement=Measurement(
            runs=runs_of(list(spread)),
            step_time_s=StepTime(median=median, ci_low=spread[0], ci_high=spread[2]),
            samples=spread,
            **START,
        ),
        settings={"fusion_check": fusion_check} if fusion_check else {},
    )


def test_a_failed_fusion_check_is_different_work_in_the_record_and_the_verdict(
    tmp_path: Path,
) -> None:
    source = _inference("torch", "eager", 0.20)
    fused = _inference("onnxruntime", "optimized", 0.10, "passed: no BatchNormalization ...")
    failed = _inference("onnxruntime", "optimized", 0.10, "failed: 53 BatchNormalization ...")
    assert not fused.different_work and not source.different_work
    assert failed.different_work and failed.to_record()["different_work"] is True
    _, (row,) = summarise([source, failed])
    assert row.verdict(short=True).endswith("[DIFFERENT WORK]")
    assert row.verdict().endswith(
        "[DIFFERENT WORK: the runtime's graph lacks a deployment's fusions "
        "(failed: 53 BatchNormalization ...)]"
    )
    _, (same,) = summarise([source, fused])
    assert "DIFFERENT WORK" not in same.verdict(short=True)
    with ResultStore(tmp_path / "r.duckdb") as store:
        store.add(failed)
        (back,) = store.results()
        (column,) = store.con.execute("SELECT different_work FROM results").fetchone()
    assert back.different_work and column is True
