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


# What the CLI must not load before it answers --help, `env` or a bad input: each takes a
# large share of a second (scipy alone, 0.75 s of 1.5 s), and none is needed to answer.
SLOW_TO_IMPORT = (
    "scipy",
    "numpy",
    "matplotlib",
    "plotly",
    "duckdb",
    "markdown_it",  # rich's Markdown, which typer's rich help layout imports
    "torch",
    "torchvision",
    "transformers",
    "tensorflow",
    "keras",
    "jax",
    "onnx",
    "onnxruntime",
    "openvino",
    "ai_edge_litert",
    "ray",
)


def test_help_env_and_bad_input_import_nothing_slow() -> None:
    """`fwbench --help`, every command's --help, `fwbench env` and two bad inputs (a
    usage error, a case that fails validation), one after another in one process: what
    any of them imports stays in sys.modules, so the check covers each of them."""
    code = f"""
import contextlib, io, sys
from fwbench.cli.app import app, main
names = [c.name for c in app.registered_commands]
asked = [
    ["--help"],
    *([name, "--help"] for name in names),
    ["env"],
    ["run", "--bogus"],
    ["run", "--framework", "nope", "--model", "resnet18"],
]
for args in asked:
    sys.argv = ["fwbench", *args]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            main()
        except SystemExit:
            pass
loaded = {{name.split(".")[0] for name in sys.modules}}
print(len(names), ",".join(sorted(loaded & set({SLOW_TO_IMPORT!r}))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    commands, slow = out.stdout.split()[0], out.stdout.split()[1:]
    assert int(commands) >= 13  # every command's help was asked for
    assert slow == [], f"imported before answering: {slow}"
