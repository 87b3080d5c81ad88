"""The package's layers hold, and its import cycles are the known ones (docs/architecture.md,
"Layers and cycles").

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
from collections.abc import Iterable
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]

# The imports that close today's package-level cycles, one per pair of packages that
# import each other: (importer, imported) -> why it is still there. Without them the
# packages form layers; a new cycle fails below until it is removed or listed here
# (and in docs/architecture.md), and a cycle that is gone fails until it is struck off.
CYCLE_CLOSING: dict[tuple[str, str], str] = {
    ("case", "distributed"): "Case validates its strategy against distributed/strategies.py, "
    "a pure table kept with the data-parallel code, whose workloads take a Case",
    ("case", "frameworks"): "Case validates against frameworks/registry.py, which lives "
    "beside the adapters that take a Case",
    ("environment", "frameworks"): "the host environment lists each registered framework's "
    "version; the adapters' base class records the host's CPU features",
    ("models", "frameworks"): "ModelSpec.builder reads a framework's models_from from the "
    "registry (inside the function); the adapters build models from the model registry",
    ("explain", "result"): "explain/side_by_side.py sets stored Results side by side, and a "
    "Result holds explain's Breakdown",
    ("measure", "launch"): "type-only: a driver tracker's hook is handed the run's "
    "CaseRequest (launch/protocol.py), and launch runs the trackers",
    ("launch", "distributed"): "the driver holds a data-parallel case's ranks as one worker "
    "(RankGroup), built on launch's worker processes and protocol",
    ("launch", "serve"): "a serving request carries its ServeSpec and the worker runs "
    "LoadGen (serve/loadgen.py); the serving driver uses launch's fork servers and workers",
}

# The packages those cycles knot together: any cycle through another package, or a
# second knot, fails.
KNOT = frozenset(
    {
        "case",
        "distributed",
        "environment",
        "explain",
        "frameworks",
        "launch",
        "measure",
        "models",
        "result",
        "serve",
    }
)


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


def _pairs(edges: Iterable[tuple[str, str]]) -> set[frozenset[str]]:
    edges = set(edges)
    return {frozenset(e) for e in edges if (e[1], e[0]) in edges}


def _knots(edges: Iterable[tuple[str, str]]) -> set[frozenset[str]]:
    """The strongly connected components of more than one package."""
    reach: dict[str, set[str]] = {}
    for a, b in edges:
        reach.setdefault(a, set()).add(b)
        reach.setdefault(b, set())
    changed = True
    while changed:  # transitive closure: a few dozen packages
        changed = False
        for seen in reach.values():
            more = set().union(*(reach[m] for m in seen)) - seen
            if more:
                seen |= more
                changed = True
    return {frozenset({a} | {b for b in reach[a] if a in reach[b]}) for a in reach if a in reach[a]}


def _show(imports: dict[tuple[str, str], list[str]], pairs: Iterable[frozenset[str]]) -> str:
    lines = []
    for pair in sorted(pairs, key=sorted):
        a, b = sorted(pair)
        for edge in ((a, b), (b, a)):
            lines += [f"  {x}" for x in imports.get(edge, [])[:3]]
    return "\n".join(lines)


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


def test_the_only_packages_importing_each_other_are_the_known_cycles() -> None:
    imports = package_imports()
    found = _pairs(imports)
    known = {frozenset(edge) for edge in CYCLE_CLOSING}
    new, gone = found - known, known - found
    assert not new, "new import cycles between packages:\n" + _show(imports, new)
    assert not gone, f"cycles gone: strike {sorted(map(sorted, gone))} off CYCLE_CLOSING"


def test_the_cycles_knot_only_the_known_packages() -> None:
    knots = _knots(package_imports())
    assert knots == {KNOT}, f"packages in cycles: {sorted(map(sorted, knots))}"


def test_without_the_cycle_closing_imports_the_packages_are_layered() -> None:
    """A cycle through packages that do not import each other directly (a -> b -> c ->
    a) passes the two tests above; here it is still a cycle."""
    imports = package_imports()
    assert set(CYCLE_CLOSING) <= set(imports), "listed import gone: update CYCLE_CLOSING"
    order: graphlib.TopologicalSorter[str] = graphlib.TopologicalSorter()
    for importer, imported in set(imports) - set(CYCLE_CLOSING):
        order.add(importer, imported)
    try:
        order.prepare()
    except graphlib.CycleError as e:
        cycle = e.args[1]  # each package is imported by the next
        shown = [f"  {x}" for a, b in itertools.pairwise(cycle) for x in imports[(b, a)][:3]]
        raise AssertionError("import cycle between packages:\n" + "\n".join(shown)) from None
