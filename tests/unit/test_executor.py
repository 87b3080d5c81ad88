"""Choosing an executor, and the Ray executor's resource policy (pure; Ray not needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from fwbench.api import RunOptions, executor_named
from fwbench.case import Case
from fwbench.errors import ExecutorError, SpecError
from fwbench.launch.local import LocalExecutor
from fwbench.launch.ray import (
    CUDA_HOST_SHARE,
    HOST_RESOURCE,
    Demand,
    RayExecutor,
    demand,
    import_ray,
    unmet,
)


def _case(device: str = "cpu", threads: int = 2, framework: str = "torch") -> Case:
    return Case.build(
        framework=framework,
        model="resnet18",
        task="infer",
        batch_size=1,
        input_size=32,
        device=device,
        threads=threads,
        mode="graph" if framework == "tensorflow" else "eager",
    )


def test_local_is_the_default_executor() -> None:
    assert isinstance(RunOptions().executor, LocalExecutor)
    assert isinstance(executor_named("local"), LocalExecutor)


def test_ray_executor_keeps_its_address() -> None:
    pytest.importorskip("ray")
    assert executor_named("ray", "auto") == RayExecutor(address="auto")
    assert executor_named("ray") == RayExecutor(address=None)


def test_without_ray_installed_only_the_ray_executor_fails_and_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees without Ray
    hint = "needs Ray: pip install 'fwbench\\[ray\\]'"
    with pytest.raises(ExecutorError, match=f"^--executor ray {hint}$"):
        executor_named("ray")
    with pytest.raises(ExecutorError, match=f"^the Ray executor {hint}$"):
        import_ray()
    assert isinstance(executor_named("local"), LocalExecutor)


@pytest.mark.parametrize(
    ("name", "address", "expected"),
    [
        ("local", "auto", "--address is for --executor ray"),
        ("slurm", None, "executor: unknown 'slurm'; valid choices: local, ray"),
    ],
)
def test_bad_executor_choice_is_one_line(name: str, address: str | None, expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        executor_named(name, address)


def test_a_cpu_case_takes_its_whole_node_and_its_threads() -> None:
    assert demand([_case(threads=2)]) == Demand(num_cpus=2, num_gpus=0, host_share=1.0)


def test_a_cuda_case_takes_one_gpu_and_a_sliver_of_the_host() -> None:
    need = demand([_case("cuda", threads=4)])
    assert need == Demand(num_cpus=4, num_gpus=1, host_share=CUDA_HOST_SHARE)
    assert need.resources() == {HOST_RESOURCE: CUDA_HOST_SHARE}
    # Every GPU of a big node can have a case, and one CPU case waits for all of them.
    assert 1 / CUDA_HOST_SHARE >= 16


def test_an_interleaved_group_alternates_on_one_device() -> None:
    group = [_case("cuda", 2), _case("cuda", 2, "tensorflow")]
    assert demand(group) == Demand(num_cpus=2, num_gpus=1, host_share=CUDA_HOST_SHARE)


NODE = {"CPU": 8.0, "GPU": 2.0, HOST_RESOURCE: 1.0}


def test_a_demand_some_node_meets_is_fine() -> None:
    small = {"CPU": 2.0}  # a node without the host resource is skipped, not an error
    assert unmet(demand([_case(threads=8)]), "x", [small, NODE]) is None
    assert unmet(demand([_case("cuda", 8)]), "x", [NODE]) is None


def test_a_cluster_without_the_host_resource_is_told_how_to_start_nodes() -> None:
    problem = unmet(demand([_case()]), "x", [{"CPU": 64.0}])
    assert problem is not None
    assert f"""--resources='{{"{HOST_RESOURCE}": 1}}'""" in problem


@pytest.mark.parametrize(
    ("case", "short_of"),
    [(_case(threads=16), "16 CPU"), (_case("cuda", 2), "1 GPU")],
)
def test_a_demand_no_node_meets_fails_before_queueing_forever(case: Case, short_of: str) -> None:
    node = {**NODE, "GPU": 0.0} if case.device == "cuda" else NODE
    problem = unmet(demand([case]), case.label(), [node])
    assert problem is not None
    assert problem.startswith(case.label()) and short_of in problem
    assert f"(largest: 8 CPU, {node['GPU']:g} GPU)" in problem


def test_serving_points_stay_on_this_machine_and_a_group_holds_one_kind(tmp_path: Path) -> None:
    from fwbench.launch.local import CASES, SERVING, kind_of
    from fwbench.launch.protocol import GroupRequest
    from fwbench.launch.serving import Point, request_of
    from fwbench.measure.settings import TimingConfig
    from fwbench.scenario.spec import ServeSpec

    point = Point(_case(), ServeSpec.build(scenario="offline"))
    serve = request_of(point, TimingConfig(), 2, tmp_path)
    assert (serve.plan.min_runs, serve.plan.max_runs) == (2, 2)
    # The worker is sent how its runs are timed, not how they are planned or read.
    assert "estimator" not in serve.sent.model_dump_json()
    case = GroupRequest.for_case(_case(), TimingConfig())
    assert "estimator" not in case.sent.model_dump_json()
    assert kind_of([serve, serve]) is SERVING and kind_of([case]) is CASES
    with pytest.raises(ValueError, match="cases or serving points, not both"):
        kind_of([case, serve])
    # Refused before Ray is imported or joined: LoadGen's logs go beside the database.
    with pytest.raises(ExecutorError, match="serving points run on this machine only"):
        RayExecutor().check([[case], [serve]])


def test_resume_skips_what_is_stored_and_measures_again_what_is_unfinished_or_retried() -> None:
    from fwbench.api import _done

    plain, retry = RunOptions(resume=True), RunOptions(resume=True, retry_failed=True)
    assert _done(plain, "ok", False) and _done(plain, "error", False)
    assert not _done(plain, "ok", True)
    assert _done(retry, "ok", False) and _done(retry, "unsupported", False)
    assert not any(_done(retry, status, False) for status in ("error", "timeout", "oom"))


def test_a_case_measured_again_replaces_its_unfinished_record(tmp_path: Path) -> None:
    """A resumed sweep kept the unfinished record beside the new one, two rows alike in
    every view (issue 43, defect 6): the new record is stored under the old one's id."""
    from fwbench.api import resumed_ids
    from fwbench.store.db import ResultStore

    from .test_parity_and_summary import result

    finished = result("torch", "eager", 0.1, 0.001)
    cut = result("tensorflow", "graph", 0.1, 0.001)
    assert cut.measurement is not None
    cut = cut.model_copy(
        update={"measurement": cut.measurement.model_copy(update={"stop_reason": "unfinished"})}
    )
    failed = result("torch", "compile", 0, 0, "error")
    with ResultStore(tmp_path / "r.duckdb") as store:
        for r in (finished, cut, failed):
            store.add(r)
        assert resumed_ids(store, RunOptions()) == {}  # not resuming: nothing replaced
        assert resumed_ids(store, RunOptions(resume=True)) == {cut.case_key: cut.result_id}
        retried = resumed_ids(store, RunOptions(resume=True, retry_failed=True))
        assert retried == {cut.case_key: cut.result_id, failed.case_key: failed.result_id}
