"""Read what a user's model declares, in a process of its own (fwbench.models.sources.
describe), with a deadline: its inputs and parameters come from the framework that
reads it, which the command's process never imports. A model whose code hangs or
crashes is one line naming it, not a hung command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from fwbench.errors import SpecError

MARK = "fwbench-describe: "
DESCRIBE_TIMEOUT_S = 300.0


def describe(text: str, timeout_s: float | None = None) -> dict[str, Any]:
    """What the model at `text` declares: {"name", "inputs" (signature text, "" when it
    declares none), "params", "outputs"}; a one-line SpecError when it cannot be read."""
    timeout_s = DESCRIBE_TIMEOUT_S if timeout_s is None else timeout_s
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "fwbench.models.sources.describe", text]
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except subprocess.TimeoutExpired:
        raise SpecError(
            f"model: {text}: reading it did not finish in {timeout_s:g} s (does its code hang?)"
        ) from None
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARK):
            found: dict[str, Any] = json.loads(line[len(MARK) :])
            if not found.pop("ok"):
                raise SpecError(f"model: {text}: {found['error']}")
            return found
    last = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    if not done.stderr.strip():
        # Its code ended the reading process (sys.exit, os._exit) before it answered.
        last = f"its code ended the process (exit code {done.returncode}) before it was read"
    raise SpecError(f"model: {text}: reading it failed: {last}")
