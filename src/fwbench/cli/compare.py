"""`fwbench compare BASE NEW`: what changed between two result sets; gates a CI job."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Annotated

import typer

from fwbench.cli.common import band_flag, console, note, out, print_json, warn
from fwbench.cli.options import BandOption, JsonOption
from fwbench.errors import SpecError


def command(
    base: Annotated[Path, typer.Argument(help="Results file to compare against.")],
    new: Annotated[Path, typer.Argument(help="Results file with the new measurements.")],
    threshold: Annotated[
        float, typer.Option(help="Smallest slowdown that counts (0.05 = 5%).")
    ] = 0.05,
    band: BandOption = None,
    json: JsonOption = False,
) -> None:
    """Match cases and serving points, report each change with its CI and significance,
    regressions first.

    Exits 1 when a significant regression beyond --threshold is found, else 0.
    """
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.report.regression import changes
    from fwbench.report.terminal import changes_table
    from fwbench.store.db import ResultStore

    if not math.isfinite(threshold) or threshold < 0:
        # nan or inf would let every slowdown pass the gate (no ratio is above them);
        # below 0 acts as 0, not as what was asked. Exit 2, not the gate's 1.
        raise SpecError(
            f"--threshold: must be a finite share of 0 or more, e.g. 0.05 for a 5% "
            f"slowdown (got {threshold})"
        )
    equivalence = band_flag(band)
    # Cases and serving points alike: a point is matched by its point key and compared on
    # the figures its report's verdicts read.
    with ResultStore(base, read_only=True, on_skip=warn, on_snapshot=note) as store:
        base_results = [*store.results(), *store.serving()]
    with ResultStore(new, read_only=True, on_skip=warn, on_snapshot=note) as store:
        new_results = [*store.results(), *store.serving()]
    found = changes(base_results, new_results, threshold, equivalence)
    regressions = [c for c in found if c.kind == "regression"]
    if json:
        print_json(
            [
                {
                    "case": c.label,
                    "kind": c.kind,
                    "figure": c.figure,
                    "ratio": c.ratio,
                    "ci_low": c.ci_low,
                    "ci_high": c.ci_high,
                    "runs": list(c.runs) if c.runs else None,
                    "equivalent": c.equivalent,
                    "equivalence_band": c.band,
                    "base_status": c.base.status if c.base else None,
                    "new_status": c.new.status if c.new else None,
                    "reason": c.reason,
                }
                for c in found
            ]
        )
    else:
        out.print(changes_table(found, f"{base} -> {new}"))
        console.print(
            f"{len(regressions)} significant regression(s) beyond {threshold:.0%}"
            if regressions
            else f"no significant regression beyond {threshold:.0%}"
        )
    if regressions:
        sys.exit(1)
