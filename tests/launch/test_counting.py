"""Count workers: what their time-out covers."""

from __future__ import annotations

import os
import time

import pytest

from fwbench.launch import counting, process
from fwbench.launch.protocol import CountItem


def test_a_count_times_the_work_not_the_frameworks_import(
    toy_framework_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The toy framework starts in 3 s; the count itself takes milliseconds. A 1 s time-out
    # is the user's for the work: a slow import must not turn it into "no count".
    monkeypatch.setenv("FWBENCH_TOY_START_S", "3")
    item = CountItem(model="toy_mlp", dims={"input_size": 4, "num_classes": 3})
    (count,) = counting.count_params("numpy", [item], timeout_s=1.0)
    assert count.error is None and count.params == 3 * 4 * 4 * 64 + 64 + 64 * 3 + 3


def test_a_count_that_never_ends_is_stopped_after_the_time_out(
    plugin_env: dict[str, str],
) -> None:
    item = CountItem(model="hang", dims={"input_size": 8, "num_classes": 3})
    (count,) = counting.count_params("torch", [item], timeout_s=1.0)
    assert count.params is None and not count.definitive
    assert count.error == "timeout: no result after 1 s; worker stopped"


def test_two_lines_written_at_once_are_both_read_before_the_writer_ends() -> None:
    # A count worker writes `started` and, a moment later, its report: the launcher may
    # find both in the pipe at once. The second must be read then, not when the worker
    # exits (a slow exit turned a finished count into a time-out).
    read_end, write_end = os.pipe()
    with os.fdopen(read_end, "rb") as stream:
        lines = process.LineReader(stream)
        with os.fdopen(write_end, "wb") as writer:
            writer.write(b'{"event": "started"}\n{"event": "report"}\n')
            writer.flush()
            deadline = time.monotonic() + 1
            assert lines.next(deadline) == b'{"event": "started"}'
            assert lines.next(deadline) == b'{"event": "report"}'
            assert lines.next(time.monotonic() + 0.1) is None  # nothing more by the deadline
            writer.write(b'{"event": ')
            writer.flush()
            assert lines.next(time.monotonic() + 0.1) is None  # half a line is no line
        with pytest.raises(EOFError):  # the writer has closed its end
            lines.next(time.monotonic() + 1)
        lines.close()
