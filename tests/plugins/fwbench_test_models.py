"""Models that misbehave on purpose, loaded through FWBENCH_PLUGINS by the tests.

`crash` kills its worker with a segmentation fault, as a broken native extension would;
`hang` never finishes building, as a deadlocked one would.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

from fwbench.models.registry import ModelSpec, register


def _segfault(num_classes: int, input_size: int) -> Any:
    ctypes.string_at(0)  # reads address 0: SIGSEGV
    raise AssertionError("unreachable")


def _hang(num_classes: int, input_size: int) -> Any:
    time.sleep(3600)
    raise AssertionError("unreachable")


for _name, _builder in (("crash", _segfault), ("hang", _hang)):
    register(
        ModelSpec(
            name=_name,
            family="test",
            input_kind="image",
            default_input_size=32,
            min_input_size=1,
            builders={"torch": _builder, "tensorflow": _builder},
            description="misbehaves on purpose (tests only)",
        )
    )
