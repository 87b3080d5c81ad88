"""The package's layers hold, and no two packages import each other (docs/architecture.md,
"Layers").

The layers are import-linter contracts in pyproject.toml, run here as `make lint` runs
them. The cycles are read from grimp's import graph of fwbench, folded to its top-level
modules and packages ("packages" below): every import counts, at module level, inside a
function or for type checking only, as in the contracts.
"""

from __future__ import annotations

import graphlib
import itertools
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]


def _package(module: str) -> str | None:
    """fwbench.launch.local -> launch; None for fwbench itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def package_imports() -> dict[tuple[str, str], list[str]]:
    """(importer, imported) package -> the module imports that make it, as text."""
    graph = grimp.build_graph("fwbench", cache_dir=None)
    found: dict[tuple[str, str], list[str]] = {}
    for module in sorted(graph.modules):
        importer = _package(module)
        for imported_module in sorted(graph.find_modules_directly_imported_by(module)):
            imported = _package(imported_module)
            if importer and imported and importer != imported:
                found.setdefault((importer, imported), []).append(f"{module} -> {imported_module}")
    return found


def _show(imports: dict[tuple[str, str], list[str]], cycle: list[str]) -> str:
    return "\n".join(f"  {x}" for a, b in itertools.pairwise(cycle) for x in imports[(b, a)][:3])


def test_the_import_linter_contracts_are_kept() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run(
        [str(lint_imports), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert " 0 broken" in out.stdout, out.stdout


def test_no_two_packages_import_each_other_by_any_chain() -> None:
    """Every import counts, type-only ones too: the packages are layered, with no cycle
    of any length (a -> b -> c -> a) and nothing set aside."""
    imports = package_imports()
    order: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for importer, imported in imports:
        order.add(importer, imported)
    try:
        order.prepare()
    except graphlib.CycleError as e:
        cycle = e.args[1]  # each package is imported by the next
        raise AssertionError("import cycle between packages:\n" + _show(imports, cycle)) from None


def test_the_layers_are_a_strict_order_with_no_exceptions() -> None:
    """The contract names no peers that may import each other, and excepts no import."""
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c for c in config["contracts"] if c["id"] == "layers"]
    assert not any(":" in layer for layer in layers["layers"]), layers["layers"]
    assert not layers.get("ignore_imports"), layers["ignore_imports"]
