"""Count workers: what their time-out covers."""

from __future__ import annotations

import pytest

from fwbench.launch import counting
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
