"""scripts/gpu-check and benchmarks/gpu_check.py, as far as a machine without a GPU can
run them: arguments, the install step into a Python that already has PyTorch, and the
record it writes. (On an H100 every check passed: docs/gpu.md.)"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu-check"
CHECKER = ROOT / "benchmarks" / "gpu_check.py"


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_check", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("name", "entry"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA A100-SXM4-80GB", None),
    ],
)
def test_the_datasheet_is_chosen_by_the_gpus_name(name: str, entry: str | None) -> None:
    found = _checker().datasheet_for(name)
    assert (found[0] if found else None) == entry


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*args], capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)


def test_bad_arguments_are_one_line_and_nonzero(tmp_path: Path) -> None:
    found = _run(sys.executable, str(CHECKER), "--out", str(tmp_path), "--only", "bogus")
    assert found.returncode != 0
    assert "unknown check 'bogus'; valid choices: env, peak" in found.stderr
    missing = _run(str(SCRIPT), "--python", sys.executable, "--wheels", str(tmp_path / "no"))
    assert missing.returncode == 2
    assert "is not a folder" in missing.stderr
    # A Python without PyTorch is not the GPU machine's own.
    bare = tmp_path / "bare"
    _run(sys.executable, "-m", "venv", "--without-pip", str(bare))
    no_torch = _run(str(SCRIPT), "--python", str(bare / "bin" / "python"), "--list")
    assert no_torch.returncode == 2
    assert "cannot import torch" in no_torch.stderr


def test_the_list_names_every_check() -> None:
    found = _run(str(SCRIPT), "--python", sys.executable, "--no-install", "--list")
    assert found.returncode == 0, found.stderr
    names = [line.split()[0] for line in found.stdout.splitlines()]
    assert names == list(_checker().CHECKS)


@pytest.mark.slow
def test_the_install_step_installs_fwbench_over_the_pythons_own_torch(tmp_path: Path) -> None:
    """Like the GPU machine: a Python whose PyTorch is already there (here: this test
    environment's packages, pip and setuptools included, seen through a .pth file) and
    no package index."""
    venv = tmp_path / "gpu-python"
    _run(sys.executable, "-m", "venv", "--without-pip", str(venv))
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "machine-packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    python = str(venv / "bin" / "python")
    torch_before = _run(python, "-c", "import torch; print(torch.__version__)").stdout
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    env = {**os.environ, "FWBENCH_GPU_CHECK_EXTRAS": "keras"}  # NVML is not installed here
    found = _run(str(SCRIPT), "--python", python, "--wheels", str(wheels), "--list", env=env)
    assert found.returncode == 0, found.stderr[-2000:]
    assert f"fwbench from {ROOT / 'src' / 'fwbench'}" in found.stderr
    assert "sync" in found.stdout
    assert _run(python, "-c", "import torch; print(torch.__version__)").stdout == torch_before
    assert _run(python, "-m", "pip", "show", "fwbench").returncode == 0


def test_without_a_gpu_the_record_says_so_and_exits_1(tmp_path: Path) -> None:
    found = _run(sys.executable, str(CHECKER), "--out", str(tmp_path), "--only", "env")
    assert found.returncode == 1
    record = json.loads((tmp_path / "gpu-check.json").read_text())
    env_line = record["checks"][0]
    assert env_line["check"] == "env"
    assert env_line["status"] == "FAIL"
    assert "FAIL  env: fwbench env detects the GPU" in found.stdout
    assert (tmp_path / "gpu-check.log").read_text().count("FAIL") >= 1


def test_the_runtimes_check_skips_an_onnxruntime_without_its_cuda_provider(
    tmp_path: Path,
) -> None:
    ort = pytest.importorskip("onnxruntime")
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    checker = _checker()
    ctx = checker.Context(tmp_path, budget_s=60, python=sys.executable)
    checker.check_runtimes(ctx)
    (line,) = ctx.lines
    assert (line.check, line.status) == ("runtimes", "SKIP")
    assert "needs onnxruntime-gpu" in line.figure
    assert json.loads((tmp_path / "gpu-check.json").read_text())["checks"][0]["status"] == "SKIP"
