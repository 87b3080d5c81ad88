"""`fwbench models`: the zoo, with trainable parameters counted in each framework."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.table import Table

from fwbench.cli.common import JsonOption, console, out, print_json
from fwbench.frameworks.registry import FRAMEWORKS
from fwbench.launch import counting
from fwbench.launch.protocol import CountItem
from fwbench.models.parity import compare
from fwbench.models.registry import all_models


def command(
    input_size: Annotated[
        int, typer.Option(help="Count at this input size. [default: each model's own]")
    ] = 0,
    num_classes: Annotated[int, typer.Option(help="Output classes.")] = 1000,
    json: JsonOption = False,
) -> None:
    """List the models; flag any whose frameworks differ by more than 2% in parameters."""
    specs = sorted(all_models().values(), key=lambda s: s.name)
    items = tuple(
        CountItem(
            model=s.name, input_size=input_size or s.default_input_size, num_classes=num_classes
        )
        for s in specs
    )
    installed = [fw for fw, info in FRAMEWORKS.items() if info.installed()]
    with console.status(f"building every model in {', '.join(installed)} to count parameters"):
        found = counting.count_in_each({fw: items for fw in installed}, timeout_s=600)
    rows: list[dict[str, Any]] = []
    for i, spec in enumerate(specs):
        counts: dict[str, int] = {}
        errors: dict[str, str] = {}
        for fw in FRAMEWORKS:
            if fw not in found:
                errors[fw] = "not installed"
                continue
            n, err = found[fw][i]
            if n is None:
                errors[fw] = err or "failed"
            else:
                counts[fw] = n
        parity = compare(counts)
        rows.append(
            {
                "name": spec.name,
                "family": spec.family,
                "input_kind": spec.input_kind,
                "input_size": items[i].input_size,
                "num_classes": num_classes,
                "description": spec.description,
                "params": counts,
                "errors": errors,
                "max_rel_diff": parity.max_rel_diff,
                "mismatch": parity.mismatch,
            }
        )
    if json:
        print_json(rows)
        return
    table = Table(title="Models (trainable parameters)", title_justify="left")
    for col in ("model", "family", "input", *FRAMEWORKS, "diff", "description"):
        table.add_column(col, justify="right" if col in FRAMEWORKS or col == "diff" else "left")
    for row in rows:
        diff = row["max_rel_diff"]
        table.add_row(
            row["name"],
            row["family"],
            f"{row['input_size']}px",
            *(
                f"{row['params'][fw]:,}" if fw in row["params"] else row["errors"].get(fw, "-")
                for fw in FRAMEWORKS
            ),
            "-" if diff is None else f"{diff:.2%}" + (" DIFFERENT" if row["mismatch"] else ""),
            row["description"],
            style="yellow" if row["mismatch"] else None,
        )
    out.print(table)
