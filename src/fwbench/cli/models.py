"""`fwbench models`: the zoo, with parameters and FLOPs counted in each framework."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.measure import Measurement

from fwbench import user_models
from fwbench.catalog.frameworks import FRAMEWORKS, get_framework
from fwbench.catalog.models import DIMENSIONS, all_models, get_model
from fwbench.catalog.sources import get_source
from fwbench.cli import choices
from fwbench.cli.common import console, out, print_json
from fwbench.cli.options import JsonOption
from fwbench.errors import SpecError


def command(
    model: Annotated[
        list[str] | None, typer.Option(help="Only these models (repeat). [default: all]")
    ] = None,
    flops: Annotated[
        bool, typer.Option(help="Also count FLOPs of one inference step (batch 1).")
    ] = True,
    input_size: Annotated[
        int | None, typer.Option(help="Count image models at this side. [default: each model's]")
    ] = None,
    framework: Annotated[
        list[str] | None,
        typer.Option(
            help=choices.frameworks_help("repeat. [default: all; one not installed says so]"),
            autocompletion=choices.complete_framework,
        ),
    ] = None,
    refresh: Annotated[
        bool,
        typer.Option(
            help="Count again instead of reading the counts kept in the cache "
            "($FWBENCH_CACHE_DIR, else ~/.cache/fwbench; kept per framework version)."
        ),
    ] = False,
    json: JsonOption = False,
) -> None:
    """List the models at their default dimensions; flag any whose frameworks differ by
    more than 2% in parameters or FLOPs. A model of your own (a file, timm:NAME, hf:ARCH,
    ...) is described instead: its source, inputs and parameters, and which frameworks
    run it, or why not."""
    # The work's modules load when it runs: --help reads only the signature.
    from fwbench.launch import counting
    from fwbench.launch.protocol import CountItem
    from fwbench.models.parity import check as check_parity
    from fwbench.report.terminal import user_model_table

    users = [m for m in model or [] if user_models.is_users(m)]
    if users:
        described = [_user_model(m) for m in users]
        if json:
            print_json(described)
        else:
            for row in described:
                out.print(user_model_table(row))
        model = [m for m in model or [] if m not in users]
        if not model:
            return
    specs = [get_model(m) for m in model] if model else list(all_models().values())
    specs.sort(key=lambda s: s.name)
    dims = [dict(s.dims) for s in specs]
    for spec, d in zip(specs, dims, strict=True):
        if input_size is not None and "input_size" in d:
            if input_size < spec.minimum("input_size"):
                raise SpecError(
                    f"input_size: {input_size} is too small for {spec.name}; "
                    f"the smallest valid value is {spec.minimum('input_size')}"
                )
            if input_size > (most := DIMENSIONS["input_size"].maximum):
                raise SpecError(f"input_size: {input_size} is past the largest, {most}")
            d["input_size"] = input_size
    shown = _frameworks(framework)
    installed = [fw for fw in shown if FRAMEWORKS[fw].installed()]
    # A framework without a FLOP counter (its entry says why) is not asked for FLOPs.
    counts_flops = {fw: flops and FRAMEWORKS[fw].counts_flops.available for fw in installed}
    # A framework counts the models it implements: one without a builder for a model
    # (Flax NNX builds the study's CNNs only) shows "-" there, not an error.
    built = {fw: [i for i, s in enumerate(specs) if s.builds(fw)] for fw in installed}
    requests = {
        fw: tuple(
            CountItem(model=specs[i].name, dims=dims[i], flops=counts_flops[fw]) for i in built[fw]
        )
        for fw in installed
    }
    what = "parameters and FLOPs" if flops else "parameters"
    started = time.perf_counter()
    total = sum(len(items) for items in requests.values())
    with console.status(f"building {len(specs)} models in {', '.join(installed)} to count {what}"):
        counted, hits = counting.cached_count_in_each(requests, timeout_s=1800, refresh=refresh)
    found = {fw: dict(zip(built[fw], counted[fw], strict=True)) for fw in counted}
    if hits < total:
        # Said on stderr where no spinner is drawn too (a CI log, nohup): the wait had a cause.
        console.print(
            f"counted {what} of {total - hits} model-framework pairs in "
            f"{time.perf_counter() - started:.0f} s ({hits} from the cache)",
            highlight=False,
        )
    rows: list[dict[str, Any]] = []
    for i, spec in enumerate(specs):
        counts: dict[str, int] = {}
        flop_counts: dict[str, float] = {}
        errors: dict[str, str] = {}
        for fw in shown:
            if fw not in found:
                errors[fw] = "not installed"
                continue
            if i not in found[fw]:
                continue
            n, err, f, _ = found[fw][i]
            if err:
                errors[fw] = err
            elif flops and not counts_flops[fw]:
                errors[fw] = "no FLOP counter"
            if n is not None:
                counts[fw] = n
            if f is not None:
                flop_counts[fw] = f
        parity = check_parity(counts)
        flop_parity = check_parity({fw: round(f) for fw, f in flop_counts.items()})
        rows.append(
            {
                "name": spec.name,
                "family": spec.family,
                "input_kind": spec.input_kind,
                "dims": dims[i],
                "objective": spec.objective,
                "training": spec.training(),
                "workload": spec.workload,
                "implementation": spec.implementation,
                "description": spec.description,
                "params": counts,
                "infer_flops": flop_counts,
                "errors": errors,
                "max_rel_diff": parity.max_rel_diff,
                "flops_rel_diff": flop_parity.max_rel_diff,
                "mismatch": parity.mismatch or flop_parity.mismatch,
            }
        )
    if json:
        print_json(rows)
        return
    _print(rows, flops, shown)


def _frameworks(named: list[str] | None) -> list[str]:
    """The frameworks to count in: those named (each a known one), else those that define
    the models. The Keras backends build TensorFlow's Keras definitions and the inference
    runtimes PyTorch's (their entries' `models_from`): the same parameters by
    construction, counted only when named (the runtimes through their exported graph,
    whose FLOPs check the export)."""
    for fw in named or ():
        get_framework(fw)
    if named:
        return list(dict.fromkeys(named))
    return [name for name, info in FRAMEWORKS.items() if info.models_from is None]


def _print(rows: list[dict[str, Any]], flops: bool, frameworks: list[str]) -> None:
    from fwbench.report.terminal import models_table

    table = models_table(rows, flops, frameworks)
    if out.is_terminal:
        out.print(table)
        return
    # A log or a file: as wide as the table needs, never a cell cut short.
    needed = Measurement.get(out, out.options, table).maximum
    out.print(table, width=max(needed, out.width))


def _user_model(text: str) -> dict[str, Any]:
    """A model of the user's: what it is, what it declares, and where it runs."""
    spec = get_model(text)
    source = get_source(spec.source)
    declared = user_models.describe(spec)
    frameworks = {}
    for name, info in FRAMEWORKS.items():
        ok, how = (
            source.can(name, spec) if source.runs else (name in spec.built_by(), "its builder")
        )
        if ok and not info.installed():
            ok, how = False, f"not installed here (pip install 'fwbench[{name}]')"
        frameworks[name] = {"runs": ok, "how": how}
    return {
        "name": spec.name,
        "source": source.name,
        "source_label": source.label,
        "runs_code": source.runs_code(spec) or None,
        "reference": spec.reference or None,
        "digest": spec.digest,
        "description": spec.description,
        "inputs": declared.get("inputs") or None,
        "usual_inputs": declared.get("defaults") or None,
        "params": declared.get("params"),
        "outputs": declared.get("outputs") or None,
        "objective": spec.objective,
        "refuses": dict(source.refuses),
        "generates": spec.context is not None,
        "frameworks": frameworks,
    }
