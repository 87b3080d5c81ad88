"""Ctrl-C while the store writes stops the command: DuckDB's client turns a SIGINT that
arrives during a query into RuntimeError("Query interrupted") (4 of these 5 tries
without store/interrupts.py), and the store gives it back as KeyboardInterrupt."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
from pathlib import Path

WRITER = """
import sys
from pathlib import Path
from fwbench.store.db import ResultStore

with ResultStore(Path(sys.argv[1])) as store:
    print("ready", flush=True)
    try:
        for _ in range(100_000):
            store.start_invocation("fwbench run", {"host": "x" * 200})
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(130)
print("finished", flush=True)
"""


def _default_sigint() -> None:
    # A shell's background job starts with SIGINT ignored; Ctrl-C here must not be.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_during_a_write_is_a_keyboard_interrupt_every_time(tmp_path: Path) -> None:
    seen = []
    for i in range(5):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path / f"r{i}.duckdb")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            preexec_fn=_default_sigint,
        )  # fmt: skip
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        # Somewhere inside the stream of writes (each a few milliseconds).
        subprocess.run(["sleep", f"{0.05 + random.random() * 0.3:.3f}"], check=True)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        seen.append((proc.returncode, out.strip(), err.strip().splitlines()[-1:]))
    assert all(code == 130 and out == "KeyboardInterrupt" for code, out, _ in seen), seen
