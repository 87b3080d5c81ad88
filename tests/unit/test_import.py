from __future__ import annotations

import subprocess
import sys


def test_importing_fwbench_and_its_cli_loads_no_framework() -> None:
    code = (
        "import sys, fwbench, fwbench.api, fwbench.cli.app, fwbench.sweep;"
        "fwbench.sweep.load_preset('quick');"
        "print(','.join(sorted({'torch', 'tensorflow', 'keras', 'jax'} & set(sys.modules))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
