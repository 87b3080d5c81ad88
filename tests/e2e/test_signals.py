"""The CLI under signals and in a hostile working directory, for real (issue "Robust on
any machine and against any input", defects 3 and 14)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from fwbench.launch.process import worker_label
from tests.conftest import FAST_TIMING_YAML, fwbench


def test_a_torch_py_in_the_working_directory_never_runs_in_a_worker(tmp_path: Path) -> None:
    marker = tmp_path / "imported"
    (tmp_path / "torch.py").write_text(f"open({str(marker)!r}, 'w').close()\nraise SystemExit(3)\n")
    env = {**os.environ, "PYTHONPATH": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "fwbench", "run", "--framework", "torch", "--model", "resnet18",
         "--task", "infer", "--batch-size", "1", "--input-size", "32", "--num-classes", "10",
         "--threads", "1", "--max-time", "0.2", "--min-runs", "1", "--max-runs", "1", "--no-flops",
         "--db", str(tmp_path / "r.duckdb"), "--json"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "ok"
    assert not marker.exists()


def _stopped_line(how: str, db: Path) -> str:
    """The last line a stopped command says: what it stored is kept, or (stopped in its
    first case) it stored nothing, and the database it had made is gone."""
    if db.exists():
        return f"{how}: results stored so far are kept (--resume goes on from them)"
    return f"{how}: nothing was stored yet, so no results file is left"


def test_sigterm_stops_with_one_line_and_leaves_no_worker_or_folder(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: torch\nmodel: resnet18\ntask: infer\nbatch_size: [1, 2, 3, 4]\n"
        "input_size: 32\nnum_classes: 10\nthreads: 1\n" + FAST_TIMING_YAML
    )
    sweep = subprocess.Popen(
        [sys.executable, "-m", "fwbench", "sweep", str(spec), "--db", str(tmp_path / "r.duckdb")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    parent = psutil.Process(sweep.pid)
    deadline = time.monotonic() + 300
    worker, label = None, None
    while worker is None and time.monotonic() < deadline:
        for child in parent.children(recursive=True):
            label = worker_label(child.pid)
            if label and label.startswith("case:"):
                worker = child
                break
        time.sleep(0.02)
    assert worker is not None, "no case worker started"
    folder = Path(os.readlink(f"/proc/{worker.pid}/fd/2")).parent
    family = [worker, *parent.children(recursive=True)]
    os.kill(sweep.pid, signal.SIGTERM)
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 143, err
    assert err.strip().splitlines()[-1] == _stopped_line("terminated", tmp_path / "r.duckdb")
    assert "Traceback" not in err
    psutil.wait_procs(family, timeout=15)
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in family)
    assert not folder.exists()
    # What was stored stays, and the sweep resumes from it.
    again = fwbench("sweep", str(spec), "--db", str(tmp_path / "r.duckdb"), "--resume")
    assert again.returncode == 0, again.stderr


def test_sigterm_stops_models_at_once_while_a_builder_hangs(plugin_env: dict[str, str]) -> None:
    # Counting waits on its workers in threads, which a signal does not reach: the hung
    # worker held `models` for its 1800 s time-out, and a retry started another after it.
    models = subprocess.Popen(
        [sys.executable, "-m", "fwbench", "models", "--model", "hang", "--model", "tiny_cnn",
         "--framework", "torch", "--no-flops"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=plugin_env,
    )  # fmt: skip
    parent = psutil.Process(models.pid)
    deadline = time.monotonic() + 120
    worker = None
    while worker is None and time.monotonic() < deadline:
        for child in parent.children(recursive=True):
            if (worker_label(child.pid) or "").startswith("count:"):
                worker = child
                break
        time.sleep(0.02)
    assert worker is not None, "no count worker started"
    folder = Path(os.readlink(f"/proc/{worker.pid}/fd/2")).parent
    time.sleep(1)  # the worker is building `hang` by now
    os.kill(models.pid, signal.SIGTERM)
    try:
        _, err = models.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        for proc in [*parent.children(recursive=True), parent]:
            proc.kill()
        raise
    assert models.returncode == 143, err
    # `models` stores no results: it does not say it kept any (issue 43, defect 9).
    assert err.strip().splitlines()[-1] == "terminated"
    assert "Traceback" not in err
    psutil.wait_procs([worker], timeout=15)
    assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
    assert not folder.exists()


def test_ctrl_c_stops_a_run_with_one_line(tmp_path: Path) -> None:
    """typer turned Ctrl-C inside a command into a silent exit 130 (issue 43, defect 9):
    the line the README promises is said."""
    run = subprocess.Popen(
        [sys.executable, "-m", "fwbench", "run", "--framework", "torch", "--model", "resnet18",
         "--task", "infer", "--input-size", "32", "--batch-size", "2", "--threads", "1",
         "--db", str(tmp_path / "r.duckdb")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        # A shell's background job (CI started with `&`) starts with SIGINT ignored,
        # which a child inherits and Python keeps: Ctrl-C reaches a terminal's command.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    parent = psutil.Process(run.pid)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if any((worker_label(c.pid) or "").startswith("case:") for c in parent.children(True)):
            break
        time.sleep(0.02)
    os.kill(run.pid, signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err
    assert err.strip().splitlines()[-1] == _stopped_line("interrupted", tmp_path / "r.duckdb")
    assert "Traceback" not in err
