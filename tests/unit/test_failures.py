"""What a failed case says: the informative line of a framework's error, and the CPU
features that decide which low-precision kernels exist."""

from __future__ import annotations

import pytest

from fwbench.environment import cpu_features, host_environment
from fwbench.errors import informative_line, one_line

KERAS_WRAPPED = """Exception encountered when calling Conv2D.call().

{{function_node __wrapped__Conv2D_device_/job:localhost/replica:0/task:0/device:CPU:0}} \
The Conv2D op currently only supports the NHWC tensor format on the CPU. The op was given \
the format: NCHW [Op:Conv2D] name:

Arguments received by Conv2D.call():
  • inputs=tf.Tensor(shape=(2, 3, 16, 16), dtype=float16)"""

GRAPH_OOM = """Graph execution error:

Detected at node StatefulPartitionedCall defined at (most recent call last):
  File "/x.py", line 3, in <module>

OOM when allocating tensor with shape[8,64,112,112] and type float on GPU_0 by allocator
\t [[{{node conv}}]] [Op:__inference_train_123]"""


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            KERAS_WRAPPED,
            "The Conv2D op currently only supports the NHWC tensor format on the CPU. "
            "The op was given the format: NCHW",
        ),
        (
            GRAPH_OOM,
            "OOM when allocating tensor with shape[8,64,112,112] and type float on GPU_0 "
            "by allocator",
        ),
        (
            "CUDA out of memory. Tried to allocate 2 GiB",
            "CUDA out of memory. Tried to allocate 2 GiB",
        ),
        ("Graph execution error:", "Graph execution error:"),  # nothing better: keep it
        (  # TensorFlow's eager message, bold on a terminal
            "{{function_node __wrapped__Conv2D}} \x1b[1m The Conv2D op ... NCHW\x1b[0m [Op:Conv2D]",
            "The Conv2D op ... NCHW",
        ),
        (  # OpenVINO's: the place in its sources first (it was cut to "core.cpp:84")
            "Exception from src/inference/src/cpp/core.cpp:84:\n"
            "Exception from src/frontends/onnx/frontend/src/frontend.cpp:120:\n"
            "Model input 'x' has an unsupported element type\n",
            "Model input 'x' has an unsupported element type",
        ),
        (
            'Expected hasRecord("version") to be true, but got false.  (Could this error '
            "message be improved?  If so, please report an enhancement request to PyTorch.)",
            'Expected hasRecord("version") to be true, but got false.',
        ),
        ("", ""),
    ],
)
def test_the_informative_line_of_a_framework_error_is_kept(text: str, line: str) -> None:
    assert informative_line(text) == line


def test_one_line_names_the_type_and_is_bounded() -> None:
    assert one_line(ValueError("x" * 2000)).startswith("ValueError: xxx")
    assert len(one_line(ValueError("x" * 2000))) == 500


def test_cpu_features_are_read_from_the_flags_and_shown_by_env() -> None:
    flags = "fpu avx2 avx512f avx512_bf16 avx512_vnni amx_tile amx_bf16 sse"
    assert cpu_features(flags) == [
        "avx2",
        "avx512f",
        "avx512_bf16",
        "avx512_vnni",
        "amx_tile",
        "amx_bf16",
    ]
    assert cpu_features("") == []
    assert isinstance(host_environment()["cpu_features"], list)


def test_a_failure_after_the_timed_blocks_is_a_warning_and_the_run_is_kept() -> None:
    """A profile that fails (or the outputs' write, or the compile cache's state) after
    the blocks were timed used to turn the whole run into an error, its blocks lost: it
    is a warning now, and the report is ok. (Stand-ins: a profiler that fails at will
    cannot be had here.)"""
    from types import SimpleNamespace
    from typing import Any

    from fwbench.launch.worker import _after_blocks

    class Profiling:
        def after(self, workload: Any) -> dict[str, Any]:
            raise RuntimeError("the profiler's buffer overflowed")

    workload = SimpleNamespace(output_sample=lambda: None)
    adapter = SimpleNamespace(compile_cache_state=lambda: {"compile_cache_hits": 1})
    settings: dict[str, Any] = {"warnings": []}
    request = SimpleNamespace(outputs_path=None)
    found = _after_blocks(workload, Profiling(), adapter, request, settings)  # type: ignore[arg-type]
    assert found == {}
    assert settings["compile_cache_hits"] == 1
    (said,) = settings["warnings"]
    assert said.startswith("after the timed blocks: RuntimeError: the profiler's buffer overflowed")
