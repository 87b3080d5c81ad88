"""Data-parallel cases without a framework: validation, sweeps, efficiency, storage."""

from __future__ import annotations

import json
import statistics
from datetime import datetime
from pathlib import Path

import duckdb
import pytest

from fwbench.case import Case, default_threads
from fwbench.distributed.comm import summarise as comm_summary
from fwbench.distributed.comm import union_length
from fwbench.errors import SpecError
from fwbench.explain.categories import Categoriser
from fwbench.explain.timeline import Event
from fwbench.launch.rank_group import tf_config
from fwbench.report import markdown, scaling
from fwbench.result import Communication, Distributed, Measurement, Result, StepTime
from fwbench.store.db import ResultStore
from fwbench.sweep import parse

from .test_parity_and_summary import START, runs_of


def ddp(**kw: object) -> Case:
    fields: dict[str, object] = {
        "framework": "torch",
        "model": "resnet18",
        "input_size": 32,
        "batch_size": 8,
        "strategy": "ddp",
    }
    return Case.build(**(fields | kw))


def test_a_strategy_case_stores_per_replica_and_global_batch() -> None:
    case = ddp(world_size=2, threads=1)
    assert (case.batch_size, case.replicas, case.global_batch_size) == (8, 2, 16)
    assert case.variant == "torch/eager/ddp"
    assert "b8 x2" in case.label()
    assert ddp().world_size == 1  # a strategy alone is one replica


def test_plain_cases_keep_their_keys() -> None:
    plain = Case.build(framework="torch", model="resnet18", threads=2)
    # Recorded before strategy / world_size existed (README's key scheme); unchanged.
    assert Case.build(framework="torch", model="resnet18", threads=2, world_size=1) == plain
    assert "strategy" not in json.dumps(plain.model_dump(exclude_none=True))
    assert plain.global_batch_size == plain.batch_size


def test_processes_share_the_cores_unless_threads_are_given() -> None:
    assert ddp(world_size=2).threads == max(1, default_threads() // 2)
    assert ddp(world_size=2, threads=3).threads == 3
    # DataParallel is one process, whatever its replicas.
    assert ddp(strategy="dp", world_size=2).threads == default_threads()


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"world_size": 2, "strategy": None}, "world_size: 2 workers need a strategy; valid"),
        ({"strategy": "multiworker"}, "valid choices for torch: ddp, dp"),
        ({"strategy": "horovod"}, "valid choices: ddp, dp, mirrored, multiworker"),
        ({"mode": "script"}, "mode: strategy ddp runs in eager mode; valid choices: eager"),
        ({"task": "infer"}, "task: strategy ddp benchmarks training; valid choices: train"),
        ({"framework": "tensorflow", "mode": "graph"}, "valid choices for tensorflow: mirrored"),
        ({"world_size": 0}, "world_size"),
    ],
)
def test_impossible_combinations_are_one_line_errors(
    fields: dict[str, object], message: str
) -> None:
    with pytest.raises(SpecError) as err:
        ddp(**fields)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_strategies_for_gpus_are_valid_cases_on_the_cpu() -> None:
    # Recorded as unsupported where they cannot run, so one sweep file works anywhere.
    assert ddp(strategy="dp", world_size=2, device="cpu").strategy == "dp"
    tf = Case.build(framework="tensorflow", model="resnet18", mode="graph", strategy="mirrored")
    assert tf.world_size == 1


def test_a_sweep_gives_each_framework_its_strategies_and_a_plain_baseline() -> None:
    sweep = parse(
        "model: resnet18\ninput_size: 32\nframework: [torch, tensorflow]\n"
        "mode: {torch: eager, tensorflow: graph}\n"
        "strategy: [null, ddp, multiworker]\nworld_size: [1, 2]\nthreads: 1\n"
    )
    labels = sorted(c.variant + f" x{c.replicas}" for c in sweep.cases)
    assert labels == [
        "tensorflow/graph x1",
        "tensorflow/graph/multiworker x1",
        "tensorflow/graph/multiworker x2",
        "torch/eager x1",
        "torch/eager/ddp x1",
        "torch/eager/ddp x2",
    ]


def test_sweep_errors_name_the_problem() -> None:
    with pytest.raises(SpecError, match="needs tensorflow in graph mode"):
        parse("model: resnet18\nframework: tensorflow\nmode: eager\nstrategy: multiworker\n")
    # Without a mode, TensorFlow takes its default (graph), which the strategy runs in.
    found = parse("model: resnet18\nframework: tensorflow\nstrategy: multiworker\n")
    assert [c.variant for c in found.cases] == ["tensorflow/graph/multiworker"]
    with pytest.raises(SpecError, match="need a strategy"):
        parse("model: resnet18\nframework: torch\nworld_size: 2\n")


def test_tf_config_names_every_worker_and_this_one() -> None:
    config = json.loads(tf_config([2001, 2002], 1))
    assert config["cluster"]["worker"] == ["127.0.0.1:2001", "127.0.0.1:2002"]
    assert config["task"] == {"type": "worker", "index": 1}


def test_communication_is_the_union_of_overlapping_collectives() -> None:
    assert union_length([(0, 2), (1, 3), (5, 6)], (0, 10)) == 4
    assert union_length([(-1, 1), (9, 12)], (0, 10)) == 2
    assert union_length([], (0, 1)) == 0
    events = [
        Event("cpu:1", 0.0, 0.5, "aten::conv2d", "aten::conv2d"),
        Event("cpu:2", 0.2, 0.6, "gloo:all_reduce", "gloo:all_reduce"),
        Event("cpu:3", 0.4, 0.8, "gloo:all_reduce", "gloo:all_reduce"),
    ]
    found = comm_summary("torch.profiler", events, (0.0, 1.0), 2, Categoriser())
    assert found["in_flight_s"] == pytest.approx(0.3)  # (0.8 - 0.2) over 2 steps
    assert found["share_of_step"] == pytest.approx(0.6)
    assert found["ops"] == ["gloo:all_reduce"]
    none = comm_summary("tf", events[:1], (0.0, 1.0), 2, Categoriser())
    assert none["in_flight_s"] is None and "no communication op" in none["error"]


def measured(case: Case, median: float, status: str = "ok") -> Result:
    m = None
    if status == "ok":
        m = Measurement(
            step_time_s=StepTime(median=median, ci_low=median * 0.99, ci_high=median * 1.01),
            samples=tuple(median * f for f in (0.98, 0.99, 1.0, 1.01, 1.02) * 2),
            runs=runs_of([median * 0.99, median, median * 1.01]),
            **START,
        )
    distributed = Distributed(
        strategy=str(case.strategy),
        strategy_label="DistributedDataParallel",
        replicas=case.replicas,
        processes=case.replicas,
        per_replica_batch_size=case.batch_size,
        global_batch_size=case.global_batch_size,
        batch_semantics="per-process batch",
        threads_per_process=case.threads,
        timed_rank="slowest rank per block",
        backend="gloo",
        communication=Communication(in_flight_s=median / 4, share_of_step=0.25),
    )
    return Result(
        result_id=f"{case.key()}{median}",
        invocation_id="r",
        recorded_at=datetime.now(),
        case=case,
        status=status,  # type: ignore[arg-type]
        error=None if status == "ok" else "DataParallel needs 2 CUDA devices",
        measurement=m,
        distributed=distributed if m else None,
    )


def test_scaling_efficiency_is_throughput_over_n_times_one_worker() -> None:
    one, two = measured(ddp(threads=1), 0.1), measured(ddp(world_size=2, threads=1), 0.125)
    assert one.throughput == pytest.approx(80) and two.throughput == pytest.approx(128)
    (panel,) = scaling.scaling([one, two])
    (series,) = panel.series
    points = {p.world_size: p for p in series.points}
    # 128 / (2 x 80) = 0.8 = t1 / t2
    assert points[2].efficiency == pytest.approx(0.8)
    assert points[2].efficiency_ci is not None
    assert points[2].efficiency_ci[0] < 0.8 < points[2].efficiency_ci[1]
    assert points[1].efficiency == pytest.approx(1.0)
    assert points[2].global_batch_size == 16
    _, body = scaling.rows([panel])
    assert body[1][6].startswith("0.80 (") and body[1][7] == "31.2 (25%)"


def test_a_scaling_rows_times_are_read_as_its_efficiency_is() -> None:
    """At 2 workers 3 of 8 blocks fast, 5 slow: the p25 its efficiency reads is the fast
    blocks', the median a slow one's. The row showed medians, whose samples/s gave 0.68
    beside an efficiency of 1.00."""
    from fwbench.launch.records import measurement_of
    from fwbench.measure.verdicts import Reading

    def blocks(case: Case, values: tuple[float, ...]) -> Result:
        made = measured(case, 0.1)
        assert made.measurement is not None
        runs = tuple(
            run.model_copy(
                update={
                    "samples": tuple(v * k for v in values),
                    "median_s": statistics.median(values) * k,
                    "ci_low_s": min(values) * k,
                    "ci_high_s": max(values) * k,
                }
            )
            for run, k in zip(made.measurement.runs, (1.0, 1.01, 0.99), strict=True)
        )
        p25 = Reading(estimator="p25")
        return made.model_copy(
            update={"measurement": measurement_of(runs, "max_runs"), "reading": p25}
        )

    one = blocks(ddp(threads=1), (0.100, 0.100, 0.101, 0.101, 0.102, 0.102, 0.103, 0.103))
    two = blocks(
        ddp(world_size=2, threads=1), (0.100, 0.100, 0.101, 0.150, 0.150, 0.151, 0.151, 0.152)
    )
    _, body = scaling.rows(scaling.scaling([one, two]))
    rates = [float(row[5]) for row in body]
    assert body[1][6].startswith("1.00 (")
    assert rates[1] / (2 * rates[0]) == pytest.approx(1.0, abs=0.005)
    assert scaling.READ in markdown.render([one, two])


def test_no_baseline_or_no_measurement_gives_no_efficiency() -> None:
    two = measured(ddp(world_size=2, threads=1), 0.125)
    dp = measured(ddp(strategy="dp", world_size=2, threads=1), 0, "unsupported")
    panels = scaling.scaling([two, dp])
    rows = {r[1]: r for r in scaling.rows(panels)[1]}
    assert rows["torch/eager/ddp"][6] == "no 1-worker baseline"
    assert rows["torch/eager/dp"][4] == "UNSUPPORTED"
    # Threads per process are part of the workload: 2 threads at 1 worker is no baseline
    # for 1 thread each at 2 workers.
    other = measured(ddp(threads=2), 0.1)
    assert all(len(p.series[0].points) == 1 for p in scaling.scaling([other, two]))
    assert "## Data-parallel scaling" in markdown.render([two, dp])


def test_distributed_results_round_trip_and_old_files_migrate(tmp_path: Path) -> None:
    from fwbench.store import schema

    old = tmp_path / "v4.duckdb"
    con = duckdb.connect(str(old))
    for sql in schema.CREATE_V1:
        con.execute(sql)
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    for v in (1, 2, 3):
        schema.MIGRATIONS[v](con)
    con.execute("UPDATE meta SET value = '4'")
    con.close()
    result = measured(ddp(world_size=2, threads=1), 0.125)
    with ResultStore(old) as store:
        store.add(result)
        (back,) = store.results()
        row = store.con.execute(
            "SELECT strategy, world_size, global_batch_size, comm_s FROM results"
        ).fetchone()
    assert back.to_record() == result.to_record()
    assert row == ("ddp", 2, 16, pytest.approx(0.125 / 4))


def test_a_strategys_environment_is_filled_in_and_appended_to_what_is_set() -> None:
    from fwbench.catalog.strategies import get_strategy

    sharded = get_strategy("sharded")
    assert sharded is not None and sharded.framework == "flax" and sharded.modes == ("jit",)
    flag = "--xla_force_host_platform_device_count=2"
    assert sharded.env_for(2, {}) == {"XLA_FLAGS": flag}
    assert sharded.env_for(2, {"XLA_FLAGS": "--xla_dump_to=x"}) == {
        "XLA_FLAGS": f"--xla_dump_to=x {flag}"
    }
    assert get_strategy("ddp").env_for(2, {}) == {}  # type: ignore[union-attr]
