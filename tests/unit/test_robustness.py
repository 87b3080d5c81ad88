"""Hostile and careless input, in process and fast: every refusal is one line with exit
code 2, no traceback, nothing written; and a regression test for each defect the
reliability pass found (issue "Robust on any machine and against any input")."""

from __future__ import annotations

import json
import math
import os
import stat
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fwbench import sweep as sweeps
from fwbench.cli.app import main
from fwbench.errors import SpecError, positive_seconds
from fwbench.launch.process import classify_exit, oom_kills
from fwbench.outputs import write_atomically
from fwbench.report import html, markdown
from fwbench.report.write import report_format, write_report
from fwbench.store.db import ResultStore

from .test_parity_and_summary import result


def cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    old = sys.argv
    sys.argv = ["fwbench", *argv]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0) if not isinstance(exc.code, str) else 1
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


# --- property: any sweep file is run, or refused in one line --------------------------

scalars = st.one_of(
    st.integers(min_value=-(10**20), max_value=10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=20),
    st.sampled_from(["resnet18", "torch", "tensorflow", "cpu", "cuda", "train", "fp16", "eager"]),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=5),
    st.dictionaries(st.text(max_size=8), scalars, max_size=3),
)
keys = st.one_of(st.sampled_from([*sweeps.AXES, *sweeps.OTHER_KEYS]), st.text(max_size=10))
documents = st.dictionaries(keys, values, max_size=8)


@pytest.mark.slow
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=documents, binary=st.binary(max_size=64), mode=st.sampled_from(["yaml", "binary"]))
def test_any_sweep_file_is_listed_or_refused_in_one_line(
    doc: dict[str, object],
    binary: bytes,
    mode: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    spec = tmp_path / "s.yaml"
    if mode == "yaml":
        spec.write_text(yaml.safe_dump(doc, allow_unicode=True))
    else:
        spec.write_bytes(b"\xff" + binary)
    db = tmp_path / "never.duckdb"
    code, _, err = cli(["sweep", str(spec), "--dry-run", "--db", str(db)], capsys)
    assert code in (0, 2), err
    assert "Traceback" not in err
    if code == 2:
        assert err.startswith("error: ") and err.count("\n") == 1, err
    assert not db.exists()


# --- one regression test per defect ----------------------------------------------------


def test_1_outputs_write_through_links_and_special_files(tmp_path: Path) -> None:
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_atomically(link, lambda p: p.write_text("new"))
    assert link.is_symlink() and target.read_text() == "new"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    write_atomically(fifo, lambda p: p.write_text("through"))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # still a FIFO, not a file
    assert os.read(reader, 100) == b"through"
    os.close(reader)
    write_atomically(Path("/dev/null"), lambda p: p.write_text("x"))
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    new = tmp_path / "new.json"
    write_atomically(new, lambda p: p.write_text("{}"))
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(new.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600


def test_2_only_definitive_parameter_counts_are_cached() -> None:
    from fwbench.launch.counting import Count

    assert Count(None, "timeout: no result after 5 s", None, definitive=False).definitive is False
    assert Count(None, "ValueError: cannot build").definitive  # the framework's own answer


def test_3_workers_do_not_import_from_the_working_directory() -> None:
    from fwbench.launch.process import worker_env

    assert worker_env(1, "cpu")["PYTHONSAFEPATH"] == "1"


def test_6_bad_values_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "r.duckdb"
    base = ["run", "--framework", "torch", "--model", "resnet18", "--db", str(db)]
    for flags, says in (
        (["--target-ci", "0"], "--target-ci"),
        (["--target-ci", "nan"], "--target-ci"),
        (["--max-time", "0"], "--max-time"),
        (["--timeout", "inf"], "timeout"),
        (["--timeout", "nan"], "timeout"),
        (["--timeout", "-5"], "timeout"),
        (["--min-runs", "0"], "--min-runs"),
    ):
        code, _, err = cli([*base, *flags], capsys)
        assert code == 2, (flags, err)
        assert err.startswith("error: ") and says in err and err.count("\n") == 1, (flags, err)
        assert not db.exists(), flags
    for bad in (math.inf, math.nan, 0, -1, True, "10"):
        with pytest.raises(SpecError, match="finite number of seconds above 0"):
            positive_seconds(bad, "timeout_s")
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("")
    code, _, err = cli([*base[:-1], str(not_a_dir / "r.duckdb")], capsys)
    assert code == 2 and f"{not_a_dir} is a file, not a directory" in err


def test_6_a_damaged_schema_version_is_one_line(tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "r.duckdb"
    ResultStore(db).close()
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = 'abc' WHERE key = 'schema_version'")
    con.close()
    from fwbench.errors import StoreError

    with pytest.raises(StoreError, match="schema version 'abc', not a number"):
        ResultStore(db)


def test_6_sweep_files_that_are_not_utf8_or_have_null_frameworks(tmp_path: Path) -> None:
    bad = tmp_path / "s.yaml"
    bad.write_bytes(b"model: resnet18\nname: \xff\xfe\n")
    with pytest.raises(SpecError, match="not UTF-8 text"):
        sweeps.load_file(bad)
    with pytest.raises(SpecError, match="framework: null is not a framework name"):
        sweeps.parse("model: resnet18\nframework: null\n")
    with pytest.raises(SpecError, match="timeout_s: must be a finite number"):
        sweeps.parse("model: resnet18\ntimeout_s: .inf\n")


def test_7_and_12_report_paths_and_formats_are_checked_up_front(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"says \.html but --format says md"):
        report_format(tmp_path / "x.html", "md")
    with pytest.raises(SpecError, match="is a directory"):
        write_report([], tmp_path, "html", "t")
    # access() says yes to root for /proc: a sweep measured for an hour, then its
    # report could not be written.
    from fwbench.outputs import check_output

    with pytest.raises(SpecError, match=r"^report /proc/x\.html: cannot write in /proc: "):
        check_output(Path("/proc/x.html"), "report")
    check_output(tmp_path / "new" / "x.html", "report")
    assert list(tmp_path.iterdir()) == []  # its probe left nothing


@pytest.mark.slow
def test_8_small_inputs_cannot_exhaust_the_machine(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n"
    for level in "bcdefghij":
        prev = chr(ord(level) - 1)
        bomb += f"{level}: &{level} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
    started = datetime.now()
    with pytest.raises(SpecError, match="once YAML aliases are expanded"):
        sweeps.parse(bomb + "model: resnet18\ndescription: *j\n")
    assert (datetime.now() - started).total_seconds() < 5
    many = (
        "model: resnet18\nbatch_size: ["
        + ", ".join(str(i % 1000 + 1) for i in range(50_000))
        + "]\n"
    )
    huge = tmp_path / "huge.yaml"
    huge.write_text(many * 8)
    with pytest.raises(SpecError, match="over 1024 KiB"):
        sweeps.load_file(huge)
    # Duplicates are dropped first: 1,000 batch sizes (not 50,000) x 2 default frameworks.
    with pytest.raises(SpecError, match="up to 2,000 cases, over the limit of 10"):
        sweeps.parse(many, max_cases=10)


def test_9_a_sigkill_is_oom_only_when_the_cgroup_says_so() -> None:
    assert classify_exit(-9, "", oom_killed=True).status == "oom"
    plain = classify_exit(-9, "", oom_killed=False)
    assert plain.status == "error" and "counted no OOM kill" in plain.error
    unknown = classify_exit(-9, "", oom_killed=None)
    assert unknown.status == "error" and "cause unknown" in unknown.error
    found = oom_kills()
    assert found is None or found >= 0
    # A real-time signal has no name: said by its number, not a ValueError.
    assert classify_exit(-40, "").error == "worker crashed: killed by signal 40"


def test_a_native_abort_is_named_by_the_line_that_says_why() -> None:
    log = (
        "I0000 00:00:1795891737.70 coordination_service.cc:502] Waiting for 0/2 tasks\n"
        "F0000 00:00:1795891743.71 grpc_server_lib.cc:103] Non-OK-status: Stop() status: "
        "UNIMPLEMENTED: Clean shutdown is not currently implemented\n"
        "Fatal Python error: Aborted\n\nCurrent thread 0x00007f29 (most recent call first):\n"
    )
    found = classify_exit(-6, log)
    assert found.error == (
        "worker crashed: killed by SIGABRT (F0000 00:00:1795891743.71 grpc_server_lib.cc:103] "
        "Non-OK-status: Stop() status: UNIMPLEMENTED: Clean shutdown is not currently "
        "implemented)"
    )
    assert classify_exit(-6, "I0000 nothing fatal here\n").error.endswith("killed by SIGABRT")
    # Found however far back it lies; the failure keeps the log's tail only.
    stacks = "".join(f'  File "x.py", line {i} in f\n' for i in range(100))
    deep = classify_exit(-6, log + stacks)
    assert deep.error == found.error and len(deep.log_tail.splitlines()) == 40


def test_11_the_title_reaches_the_html_and_12_markdown_is_escaped() -> None:
    r = result("torch", "eager", 0.1, 0.001)
    page = html.render([r], title="My <sweep>")
    assert "<title>My &lt;sweep&gt;</title>" in page and "<h1>My &lt;sweep&gt;</h1>" in page
    text = markdown.render([r], title="a | b <script>")
    assert "# a \\| b &lt;script&gt;" in text
    assert "<script>" not in text
    # A backslash before a pipe would split a cell; a link would be live.
    named = r.case.model_copy(update={"model": "m\\|x [click](https://e.example) ![](u)"})
    row = next(
        line
        for line in markdown.render([r.model_copy(update={"case": named})]).splitlines()
        if "click" in line
    )
    assert "m\\\\\\|x \\[click\\](https://e.example) !\\[\\](u)" in row, row


def test_14_yaml_true_is_not_a_batch_size_and_excluding_everything_says_so() -> None:
    with pytest.raises(SpecError, match="batch_size: true is not a valid value"):
        sweeps.parse("model: resnet18\nbatch_size: true\n")
    with pytest.raises(SpecError, match="`exclude` removes all 2"):
        sweeps.parse("model: resnet18\nexclude: [{model: resnet18}]\n")


def test_errors_are_json_safe_one_liners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(["results", "--db", str(tmp_path / "missing.duckdb"), "--json"], capsys)
    assert code == 2 and out == "" and err.startswith("error: no results file")
    json.dumps(err)


def test_13_ray_workers_that_never_start_fail_fast_with_the_reason() -> None:
    from types import SimpleNamespace

    from fwbench.errors import ExecutorError
    from fwbench.launch import ray as ray_executor

    class GetTimeoutError(Exception):
        pass

    class RayError(Exception):
        pass

    waited: list[float] = []

    def get(ref: object, timeout: float) -> None:
        waited.append(timeout)
        raise GetTimeoutError

    task = SimpleNamespace(remote=lambda: "ref")
    fake = SimpleNamespace(
        remote=lambda **_: lambda fn: task,
        get=get,
        cancel=lambda ref, force: None,
        exceptions=SimpleNamespace(GetTimeoutError=GetTimeoutError, RayError=RayError),
    )
    with pytest.raises(ExecutorError, match="none of its workers ran a task within 60 s"):
        ray_executor._check_workers_start(fake)  # type: ignore[arg-type]
    assert waited == [ray_executor.WORKER_START_TIMEOUT_S]


@pytest.mark.parametrize("after, status", [(4, "oom"), (3, "error"), (None, "error")])
def test_a_rank_the_kernel_killed_for_memory_is_an_oom_result(
    after: int | None, status: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torchrun exits with 1 when the kernel kills a rank for memory: where the cgroup's
    OOM-kill count rose during the run the case is `oom`, as a single worker's is; where
    it did not, or cannot be read, an error. (The group's fields are set by hand: a real
    rank cannot be OOM-killed here on purpose.)"""
    from types import SimpleNamespace

    from fwbench.launch import process, rank_group

    log = tmp_path / "torchrun.log"
    log.write_text("torch.distributed.elastic: Signal 9 (SIGKILL) received by PID 4242\n")
    proc = SimpleNamespace(popen=SimpleNamespace(returncode=1), log=log)
    group = object.__new__(rank_group.RankGroup)
    group.oom_kills_at_start, group.processes = 3, [proc]
    monkeypatch.setattr(process, "oom_kills", lambda: after)
    found = group._crashed(proc)  # type: ignore[arg-type]
    assert found.status == status, found.error
    assert "torchrun" in found.error


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--trace-dir", "FILE"], "--trace-dir FILE: is a file; give a folder"),
        (["--trace-dir", "/proc/x"], "--trace-dir /proc/x: cannot write in /proc: "),
        (["--steps", "999999999"], "--steps: profile 1 to 1000 steps (got 999999999)"),
        (["--max-time", "0"], "--max-time: Input should be greater than 0"),
    ],
)
def test_explains_bad_flags_are_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], says: str
) -> None:
    """A --trace-dir naming a file crashed with FileExistsError after the plan, /proc was
    refused after it, --max-time 0 was called --run-time, --steps had no top."""
    a_file = tmp_path / "sweep.yaml"
    a_file.write_text("model: resnet18\n")
    flags = [str(a_file) if f == "FILE" else f for f in flags]
    db = tmp_path / "r.duckdb"
    argv = ["explain", "--model", "resnet18", "--framework", "torch", *flags, "--db", str(db)]
    code, out, err = cli(argv, capsys)
    assert code == 2 and out == "", (out, err)
    assert err.startswith("error: " + says.replace("FILE", str(a_file))), err
    assert err.count("\n") == 1 and not db.exists()


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["peak", "--threads", "-1"], "--threads: -1 is outside 1 to 1024 (0: physical cores)"),
        (["peak", "--size", "99999999"], "--size: 99999999 is outside 16 to 16384"),
        (["models", "--input-size", "999999999"], "input_size: 999999999 is past the largest"),
    ],
)
def test_numbers_without_a_bound_are_refused_before_a_worker_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], says: str
) -> None:
    """`peak --threads -1` reached its worker as OMP_NUM_THREADS=-1, `--size 99999999`
    asked for a matrix of petabytes, `models --input-size 999999999` was described."""
    db = tmp_path / "r.duckdb"
    code, out, err = cli([*argv, *(["--db", str(db)] if argv[0] == "peak" else [])], capsys)
    assert code == 2 and err.startswith("error: " + says), (out, err)
    assert not db.exists()


def test_a_dry_run_refuses_what_the_run_would_and_answers_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sweep --dry-run --timeout -1` listed its cases, and a serving sweep's dry run
    accepted --budget and --executor ray, which the run refuses; --dry-run --json
    printed nothing on stdout."""
    from fwbench.case import default_threads

    plain = tmp_path / "plain.yaml"
    plain.write_text("model: resnet18\nframework: torch\ntask: infer\ninput_size: 32\n")
    served = tmp_path / "served.yaml"
    served.write_text(plain.read_text() + "serve:\n  - {scenario: offline}\n")
    db = ["--db", str(tmp_path / "r.duckdb")]
    for argv, says in (
        ([str(plain), "--timeout", "-1"], "timeout: must be a finite number of seconds"),
        ([str(served), "--budget", "5m"], "--budget: a serving point makes a fixed number"),
        ([str(served), "--executor", "ray"], "--executor ray: serving points run on this"),
    ):
        code, _, err = cli(["sweep", *argv, "--dry-run", *db], capsys)
        assert code == 2 and err.startswith("error: " + says), err
    code, out, err = cli(["sweep", str(plain), "--dry-run", "--json", *db], capsys)
    assert code == 0, err
    listed = json.loads(out)
    assert [p["label"] for p in listed["planned"]] == [
        "torch/eager resnet18 infer b32 32px c1000 cpu t" + str(default_threads())
    ]
    assert listed["summary"].startswith("1 cases; estimated")
    argv = ["tune", "resnet18", "--framework", "torch", "--mode", "eager", "--dry-run"]
    code, out, err = cli([*argv, "--json", *db], capsys)
    assert code == 0 and len(json.loads(out)) >= 2, err
    code, _, err = cli([*argv, "--timeout", "-1", *db], capsys)
    assert code == 2 and err.startswith("error: --timeout: must be a finite number"), err


def test_results_of_an_invocation_not_in_the_database_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A mistyped id read as an empty table and exit 0, while `report` refused it."""
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(result("torch", "eager", 0.1, 0.001))
    code, _, err = cli(["results", "--db", str(db), "--invocation", "nope"], capsys)
    assert code == 2 and err == f"error: {db} holds no invocation 'nope'; see `fwbench results`\n"
    code, out, err = cli(["results", "--db", str(db), "--invocation", "r", "--json"], capsys)
    assert code == 0 and len(json.loads(out)) == 1, err


def test_an_error_names_the_problem_the_user_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A /proc database read as "only 0.0 MiB free"; an export to a folder as "unknown
    export format ''"; an empty model name as a folder without a saved_model.pb; an
    export whose -o and --format disagree was written as CSV into x.json."""
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(result("torch", "eager", 0.1, 0.001))
    for argv, says in (
        (
            ["run", "--framework", "torch", "--model", "resnet18", "--db", "/proc/x.duckdb"],
            "--db /proc/x.duckdb: cannot",
        ),
        (["export", "--db", str(db), "-o", str(tmp_path)], f"-o {tmp_path}: is a directory"),
        (
            ["export", "--db", str(db), "-o", str(tmp_path / "x.json"), "--format", "csv"],
            f"-o {tmp_path / 'x.json'} says .json but --format says csv",
        ),
        (
            ["run", "--framework", "torch", "--model", "", "--db", str(tmp_path / "n.duckdb")],
            "model: empty; give a",
        ),
    ):
        code, _, err = cli(argv, capsys)
        assert code == 2 and err.startswith("error: " + says), (argv, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.duckdb"]
