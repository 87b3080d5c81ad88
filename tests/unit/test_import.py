from __future__ import annotations

import subprocess
import sys


def test_importing_fwbench_and_its_cli_loads_no_framework_nor_ray() -> None:
    code = (
        "import sys, fwbench, fwbench.api, fwbench.cli.app, fwbench.sweep;"
        "fwbench.load_preset('quick'); fwbench.Case; fwbench.run_cases; fwbench.ResultStore;"
        "import fwbench.report.html, fwbench.report.png;"
        "frameworks = {'torch', 'tensorflow', 'keras', 'jax', 'ai_edge_litert', 'ray'};"
        "print(','.join(sorted(frameworks & set(sys.modules))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
