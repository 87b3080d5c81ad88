"""Looking while it runs (issue 43, item 10): `fwbench results --db X` while a sweep wrote
X said "in use by another process". A reader now reads a copy of the file and its log,
taken when it starts, said in one line, and never touches the writer's files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from fwbench.errors import StoreError
from fwbench.store import snapshot
from fwbench.store.db import ResultStore

from .test_parity_and_summary import result
from .test_robustness import cli

ROOT = Path(__file__).parents[2]

# A sweep's part that matters here: a process holding the database open for writing,
# storing one result per transaction (its last ones in the log, not yet checkpointed).
WRITER = """
import sys
from pathlib import Path
from fwbench.store.db import ResultStore
from fwbench.store.imports import read_records

db, records = Path(sys.argv[1]), read_records(Path(sys.argv[2]))
with ResultStore(db) as store:
    store.add(records[0])
    store.add(records[1])
    print("stored 2", flush=True)
    sys.stdin.readline()
    store.add(records[2])
    print("stored 3", flush=True)
"""


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A database with an initial result, then a writer process holding it with two."""
    db = tmp_path / "sweep" / "r.duckdb"
    db.parent.mkdir()
    records = [
        result("torch", "eager", 0.10, 0.001),
        result("tensorflow", "graph", 0.13, 0.001),
        result("torch", "compile", 0.09, 0.001),
    ]
    (tmp_path / "records.json").write_text(
        json.dumps([r.to_record() for r in records], default=str)
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), str(tmp_path / "records.json")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    try:
        assert proc.stdout.readline().strip() == "stored 2"
        yield db, proc
    finally:
        proc.kill()
        proc.wait()


def files_of(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


def test_a_database_a_sweep_is_writing_is_read_through_a_snapshot(
    writer: tuple[Path, subprocess.Popen[str]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, proc = writer
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # Its last results live only in the log: a copy of the file alone would miss them.
    assert db.with_name("r.duckdb.wal").stat().st_size > 0
    before = files_of(db.parent)

    code, out, err = cli(["results", "--db", str(db), "--json"], capsys)
    assert code == 0, err
    assert {r["mode"] for r in json.loads(out)} == {"eager", "graph"}
    assert f"note: read a snapshot of {db} taken now" in " ".join(err.split())
    assert f"(PID {proc.pid}, a sweep?) is writing it" in " ".join(err.split())
    assert len(err.strip().splitlines()) <= 2  # one line, wrapped at most once by rich

    out_dir = tmp_path / "out"
    for argv in (
        ["report", "-o", str(out_dir / "report.md")],
        ["export", "-o", str(out_dir / "all.json")],
        ["compare", str(db), str(db)],
    ):
        code, _, err = cli([*argv] + (["--db", str(db)] if argv[0] != "compare" else []), capsys)
        assert code == 0, (argv, err)
        assert "read a snapshot of" in err, argv
    assert len(json.loads((out_dir / "all.json").read_text())) == 2

    # The writer's files are as they were (nothing written, nothing added beside them),
    # every copy is gone, and the writer goes on storing.
    assert files_of(db.parent) == before
    assert list(scratch.iterdir()) == []
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go on\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "stored 3"
    assert proc.wait(timeout=60) == 0
    code, out, err = cli(["results", "--db", str(db), "--json"], capsys)
    assert code == 0 and "snapshot" not in err
    assert len(json.loads(out)) == 3


def test_a_command_that_writes_is_still_refused_while_a_sweep_writes(
    writer: tuple[Path, subprocess.Popen[str]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, proc = writer
    (tmp_path / "in.json").write_text(
        json.dumps([result("torch", "script", 0.1, 0.001).to_record()], default=str)
    )
    code, _, err = cli(["import", str(tmp_path / "in.json"), "--db", str(db)], capsys)
    assert code == 2
    assert f"is in use by another process (PID {proc.pid}, a sweep?)" in " ".join(err.split())
    with pytest.raises(StoreError, match="in use by another process"):
        ResultStore(db, read_only=True)  # a reader that did not ask for a snapshot


def test_a_copy_made_across_a_checkpoint_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(result("torch", "eager", 0.10, 0.001))
    real = snapshot._state
    seen: list[object] = []

    def state(path: Path) -> object:
        found = real(path)
        seen.append(found)
        # The first copy sees the file change under it (a checkpoint).
        return (*found, len(seen)) if found and len(seen) <= 2 else found

    monkeypatch.setattr(snapshot, "_state", state)
    monkeypatch.setattr(snapshot.time, "sleep", lambda s: None)
    taken = snapshot.take(db, "busy")
    try:
        assert len(seen) == 4  # two copies, the second one kept
        assert taken.path.read_bytes() == db.read_bytes()
    finally:
        taken.remove()
    assert not taken.path.parent.exists()

    monkeypatch.setattr(snapshot, "_state", lambda path: object())  # changes every time
    with pytest.raises(StoreError, match="busy, and it changed during each of 5 copies"):
        snapshot.take(db, "busy")


def test_a_snapshot_that_does_not_fit_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "r.duckdb"
    with ResultStore(db) as store:
        store.add(result("torch", "eager", 0.10, 0.001))

    class Usage:
        free = 1 << 20

    monkeypatch.setattr(snapshot.shutil, "disk_usage", lambda where: Usage)
    with pytest.raises(StoreError, match=r"busy, and a copy to read \(.* MiB\) does not fit"):
        snapshot.take(db, "busy")
