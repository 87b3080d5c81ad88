"""Choosing an executor."""

from __future__ import annotations

import pytest

from fwbench.api import RunOptions, executor_named
from fwbench.errors import SpecError
from fwbench.launch.local import LocalExecutor


def test_local_is_the_default_executor() -> None:
    assert isinstance(RunOptions().executor, LocalExecutor)
    assert isinstance(executor_named("local"), LocalExecutor)


@pytest.mark.parametrize(
    ("name", "address", "expected"),
    [
        ("local", "auto", "--address is for a cluster"),
        ("slurm", None, "executor: unknown 'slurm'; valid choices: local"),
    ],
)
def test_bad_executor_choice_is_one_line(name: str, address: str | None, expected: str) -> None:
    with pytest.raises(SpecError, match=expected):
        executor_named(name, address)
