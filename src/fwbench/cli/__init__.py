"""The command line: one module per command, each a thin layer over fwbench's API.

A command module imports at its top what its signature and its checks of the flags
need (cli/options.py, the registries, the settings); the API, the driver, the store and
the renderers are imported inside the functions that use them. So `fwbench --help`, a
command's --help, `fwbench env` and a bad input answer without loading scipy, numpy,
matplotlib, plotly, DuckDB or a framework (tests/unit/test_import.py checks it).
"""
