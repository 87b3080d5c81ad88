"""The published studies fwbench reproduces: their claims as data, evaluated on results.

The studies are the package's YAML files (`asu.yaml`, ...), listed here without reading
them, for the CLI's help; `claims.py` reads and judges them.
"""

from importlib import resources


def studies() -> list[str]:
    """The studies' names, one per YAML file of this package."""
    files = resources.files("fwbench.studies").iterdir()
    return sorted(p.name.removesuffix(".yaml") for p in files if p.name.endswith(".yaml"))
