"""Fork servers and runs, with the real frameworks: workers forked from a server that
imported the framework once, crashes classified through it, spawning as the fallback,
and a case measured in several runs."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from fwbench.api import RunOptions, run_cases
from fwbench.case import Case
from fwbench.launch import forkserver
from fwbench.launch.forkserver import SLOTS, ForkServers
from fwbench.launch.process import WorkerProcess, classify_exit, worker_env
from fwbench.launch.protocol import CaseRequest, GroupRequest
from fwbench.measure.settings import TimingConfig
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING


def _tiny(framework: str = "torch", mode: str = "eager") -> Case:
    return Case.build(
        framework=framework, model="tiny_cnn", task="infer", batch_size=2,
        num_classes=10, threads=1, mode=mode,
    )  # fmt: skip


def test_a_forked_worker_measures_a_case_and_a_crash_is_classified(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    servers = ForkServers(tmp_path)
    try:
        env = worker_env(1, "cpu")
        server = servers.get("torch", env)
        assert not isinstance(server, str), server
        assert servers.get("torch", env) is server  # one per framework and environment
        started = time.monotonic()
        worker = WorkerProcess("case: test", env, time.monotonic() + 60, 60, server)
        assert worker.launcher == "fork-server"
        assert psutil.Process(worker.pid).ppid() == server.proc.pid
        worker.send(CaseRequest(case=_tiny(), timing=FAST_TIMING.run, count_flops=False))
        built = worker.receive()
        assert built["event"] == "built", built
        # PyTorch was imported by the server, not by this worker: it is built in well
        # under the 2-3 s an import takes on this machine.
        assert time.monotonic() - started < 2.0
        worker.send({"op": "steady"})
        assert worker.receive()["event"] == "steady"
        worker.send({"op": "block", "warm": 1, "steps": 3})
        assert worker.receive()["event"] == "block"
        worker.send({"op": "finish"})
        assert worker.receive()["report"]["status"] == "ok"
        worker.close()

        # A sibling from the same server still runs while the crashed one is closed:
        # closing it asks nothing more of the server (its child was reaped once), so it
        # is immediate, not the server's whole 10 s wait for a pid it no longer has.
        sibling = WorkerProcess("case: sibling", env, time.monotonic() + 60, 60, server)
        doomed = WorkerProcess("case: doomed", env, time.monotonic() + 60, 60, server)
        os.kill(doomed.pid, signal.SIGSEGV)
        code = doomed.returncode(10.0)
        assert code == -signal.SIGSEGV
        assert classify_exit(code, "").error == "worker crashed: killed by SIGSEGV"
        closing = time.monotonic()
        doomed.close()
        assert time.monotonic() - closing < 2.0
        sibling.close()
    finally:
        servers.close()


def test_without_a_server_workers_are_spawned_and_say_why(tmp_path: Path) -> None:
    servers = ForkServers(tmp_path)
    try:
        reason = servers.get("no-such-framework", worker_env(1, "cpu"))
        assert isinstance(reason, str) and "did not start" in reason
        worker = WorkerProcess(
            "case: spawned", worker_env(1, "cpu"), time.monotonic() + 30, 30, reason
        )
        assert worker.launcher.startswith("spawn (fork server for no-such-framework")
        worker.close()
    finally:
        servers.close()


def test_a_case_is_measured_in_runs_that_alternate_with_its_rival(
    tmp_path: Path, plugin_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    timing = FAST_TIMING.replace(min_runs=3, max_runs=3)
    cases = [_tiny("torch"), _tiny("tensorflow", "graph")]
    # This command's temporary files, the launcher's and its workers', all in one place.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with ResultStore(tmp_path / "r.duckdb") as store:
        options = RunOptions(timing=timing, count_flops=False)
        results = list(run_cases(cases, store, "runs", options))
    # Forked workers end by os._exit, which skips atexit: TensorFlow's autograph used to
    # leave its generated modules behind, run after run. (PyTorch's import makes one empty
    # per-user folder, shared by every command.)
    left = [p.name for p in scratch.rglob("*") if not p.name.startswith("torchinductor_")]
    assert left == []
    for r in results:
        assert r.status == "ok", r.error
        m = r.measurement
        assert m is not None
        assert [run.index for run in m.runs] == [0, 1, 2]
        assert all(run.launcher == "fork-server" for run in m.runs)
        assert m.ci_method.startswith("t interval on the log medians of 3 runs")
        assert m.step_time_s.ci_low < m.step_time_s.median < m.step_time_s.ci_high
        assert all(run.other_cpu_cores is not None for run in m.runs)
        # What each run cost beyond its build, warmup and blocks is kept with it.
        assert all(run.start_s is not None and run.start_s >= 0 for run in m.runs)
        assert all(run.finish_s is not None and run.finish_s >= 0 for run in m.runs)
        # Alternating blocks are lengthened so that the switch costs nothing measurable.
        assert all(
            run.steps_per_block * run.median_s >= 0.9 * timing.run.min_switch_block_s
            for run in m.runs
        )
    assert TimingConfig().plan.min_runs == 3  # the default a user gets


def test_spread_workloads_take_turns_run_by_run(plugin_env: dict[str, str]) -> None:
    """With spread 2, round 2 of the first workload waits for round 1 of the second, so a
    case's runs are spread in time; with spread 1 each workload finishes first."""
    from fwbench.launch.local import LocalExecutor

    timing = FAST_TIMING.replace(min_runs=2, max_runs=2)
    groups = [
        [GroupRequest.for_case(_tiny("torch").model_copy(update={"batch_size": b}), timing,
                               count_flops=False)]
        for b in (2, 3)
    ]  # fmt: skip

    def order(spread: int) -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []

        def status(text: str) -> None:
            if "building" in text:
                seen.append((text.split(":")[0], " b2 " if " b2 " in text else " b3 "))

        handed = list(LocalExecutor(spread).run(groups, 300, on_status=status))
        # After round 1 each group's one run so far is handed back, then the group whole.
        so_far = [d for d in handed if not d.final]
        assert sorted(d.index for d in so_far) == [0, 1]
        assert all(
            [len(o.runs), o.stop_reason] == [1, "unfinished"] for d in so_far for o in d.outcomes
        )
        done = [d for d in handed if d.final]
        assert sorted(d.index for d in done) == [0, 1]
        for d in done:
            (outcome,) = d.outcomes
            assert [len(outcome.runs), outcome.stop_reason] == [2, "max_runs"]
            # The second run warmed up on its own but took the block size its first found.
            first, second = outcome.runs
            assert second.steps_per_block == first.steps_per_block
            assert second.warmup_steps >= 1
        return seen

    turns = [("run 1", " b2 "), ("run 1", " b3 "), ("run 2", " b2 "), ("run 2", " b3 ")]
    assert order(2) == turns
    assert order(1) == [turns[0], turns[2], turns[1], turns[3]]


def test_spread_is_refused_where_it_means_nothing() -> None:
    import pytest

    from fwbench.api import executor_named
    from fwbench.errors import SpecError

    with pytest.raises(SpecError, match="--spread: must be 1 or more"):
        executor_named("local", spread=0)
    with pytest.raises(SpecError, match="--spread: applies to the local executor"):
        executor_named("ray", spread=2)
    assert executor_named("local", spread=3).spread == 3


def test_a_budget_stops_each_workload_at_its_minimum_once_its_share_is_spent(
    plugin_env: dict[str, str],
) -> None:
    from fwbench.launch.local import LocalExecutor

    # Runs that would go on to max_runs (an unreachable precision target), were it not
    # for the budget: each group gets its minimum, then stops on its spent share.
    timing = FAST_TIMING.replace(
        **{
            "min_runs": 2,
            "max_runs": 4,
            "target_ci": 1e-9,
            "stop_on": "precision",
            "max_time_s": 1e6,
        }
    )
    groups = [
        [GroupRequest.for_case(_tiny("torch").model_copy(update={"batch_size": b}), timing,
                               count_flops=False)] * 2
        for b in (2, 3)
    ]  # fmt: skip
    done = [d for d in LocalExecutor(budget_s=1e-3).run(groups, 300) if d.final]
    assert [d.index for d in done] == [0, 1]
    for d in done:
        assert [(len(o.runs), o.stop_reason) for o in d.outcomes] == [(2, "time_share")] * 2


def test_a_budget_gives_a_workload_run_whole_an_equal_share_of_what_is_left() -> None:
    """Data-parallel groups run whole, each with an equal share of what is left (the
    others' schedule, minimum first and then the time left where it decides, is
    tests/unit/test_budget.py's)."""
    import pytest

    from fwbench.api import executor_named
    from fwbench.errors import SpecError
    from fwbench.launch.local import _Budget

    now = time.monotonic()
    deadline = _Budget(100.0, groups=4, started=now).equal(0, 1)
    assert 24 < deadline - now <= 25.1
    spent = _Budget(100.0, groups=4, started=now - 200).equal(2, 1)  # over budget
    assert spent <= time.monotonic()
    with pytest.raises(SpecError, match="--budget: applies to the local executor"):
        executor_named("ray", budget_s=60.0)


def test_a_command_ended_in_the_middle_of_a_group_keeps_its_finished_runs(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    """Each round's runs are stored as they finish; a resumed command measures the
    unfinished cases again, and the last record of a case is its whole measurement."""
    import pytest

    from fwbench.api import done_keys
    from fwbench.launch.executor import GroupDone
    from fwbench.launch.local import LocalExecutor

    class EndsAfterOneRound(LocalExecutor):
        def run(self, *args: Any, **kwargs: Any) -> Iterator[GroupDone]:
            for done in super().run(*args, **kwargs):
                yield done
                if not done.final:
                    raise KeyboardInterrupt  # what Ctrl-C raises in the command

    timing = FAST_TIMING.replace(min_runs=2, max_runs=2)
    cases = [_tiny("torch"), _tiny("torch").model_copy(update={"batch_size": 3})]
    with ResultStore(tmp_path / "r.duckdb") as store:
        ended = RunOptions(timing=timing, count_flops=False, executor=EndsAfterOneRound())
        with pytest.raises(KeyboardInterrupt):
            list(run_cases(cases, store, "ended", ended))
        (kept,) = store.results()  # the first workload's one run; the second never began
        assert kept.measurement is not None
        assert (len(kept.measurement.runs), kept.measurement.stop_reason) == (1, "unfinished")
        assert any(w.startswith("unfinished: the command ended after 1") for w in kept.warnings)
        resumed = RunOptions(timing=timing, count_flops=False, resume=True)
        assert done_keys(store, resumed) == set()
        again = list(run_cases(cases, store, "resumed", resumed))
        assert [len(r.measurement.runs) for r in again if r.measurement] == [2, 2]
        latest = store.latest(c.key() for c in cases)
        assert [r.measurement.stop_reason for r in latest if r.measurement] == ["max_runs"] * 2
        # One record per case and command: the second round's replaced the first's.
        assert len(store.results(invocation_id="resumed")) == 2


def test_a_frameworks_servers_for_every_slot_start_together(tmp_path: Path) -> None:
    """The first run's server starts with the others (their imports overlap), and all are
    ready before it returns: none imports while a run is timed."""
    servers = ForkServers(tmp_path)
    try:
        env = worker_env(1, "cpu")
        first = servers.get("torch", env, 0)
        assert not isinstance(first, str), first
        started = [s for s in servers._servers.values() if isinstance(s, forkserver.ForkServer)]
        assert len(started) == SLOTS
        assert all(s.alive() for s in started)
        for run in range(SLOTS):
            assert servers.get("torch", env, run) is started[run]  # no server started again
        assert len(servers._servers) == SLOTS
        # A case of one run starts one server, not servers it will never use.
        single = worker_env(2, "cpu")
        assert not isinstance(servers.get("torch", single, 0, runs=1), str)
        assert len(servers._servers) == SLOTS + 1
    finally:
        servers.close()


def test_a_server_whose_imports_opened_the_gpu_driver_is_refused(
    monkeypatch: Any,
) -> None:
    """Forking after CUDA was touched would hand each worker a broken context: the server
    looks for the driver's device files among its open descriptors."""
    assert forkserver.gpu_driver_files() == []  # nothing here opens a GPU
    links = {"3": "/dev/nvidiactl", "4": "/dev/nvidia0", "5": "/tmp/x.log", "6": "/dev/null"}
    monkeypatch.setattr(forkserver.os, "listdir", lambda path: list(links))
    monkeypatch.setattr(forkserver.os, "readlink", lambda path: links[path.rsplit("/", 1)[-1]])
    assert forkserver.gpu_driver_files() == ["/dev/nvidia0", "/dev/nvidiactl"]


def test_the_runs_of_a_command_share_what_jax_compiled(
    tmp_path: Path, plugin_env: dict[str, str]
) -> None:
    """keras-jax keeps its XLA executables in the command's cache folder (the next run
    loads them instead of compiling), and the result says so."""
    from fwbench.launch import local

    cache = tmp_path / "cache"
    request = GroupRequest.for_case(
        _tiny("keras-jax", "jit"), FAST_TIMING, count_flops=False, compile_cache=str(cache),
    )  # fmt: skip
    outcome = local.run_group([request], 120)[0]
    assert outcome.report is not None and outcome.report.status == "ok", outcome
    assert outcome.report.settings["compile_cache"].startswith("XLA executables")
    assert any((cache / "jax").iterdir())
    assert outcome.report.settings["compile_cache_scope"] == "between commands"
    # Without the option (--no-compile-cache), the executables stay in the run's own
    # folder, never in JAX's machine-wide default, and the result says they were not kept.
    off = FAST_TIMING.replace(compile_cache=False)
    plain = local.run_group([GroupRequest.for_case(_tiny("keras-jax", "jit"), off)], 120)[0]
    assert plain.report is not None and plain.report.status == "ok", plain
    assert plain.report.settings["compile_cache_scope"] == "this run only"
    assert str(cache) not in plain.report.settings["compile_cache"]
    # PyTorch eager compiles nothing: its record does not claim a cache.
    eager = GroupRequest.for_case(_tiny("torch", "eager"), FAST_TIMING, compile_cache=str(cache))
    found = local.run_group([eager], 120)[0]
    assert found.report is not None and found.report.status == "ok", found
    assert "compile_cache" not in found.report.settings
