"""A user's model made ready for cases: resolved by its source (fwbench.catalog.sources),
what it declares read once in a worker (fwbench.launch.describe; cached by its name,
which carries its content hash, and the framework's version), and its inputs merged
with what `--input-shape` gave. The command's process imports no framework for it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from fwbench import cache
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.catalog.inputs import format_signature, merge, parse_given, parse_signature
from fwbench.catalog.models import TENSORS, USER_OBJECTIVES, ModelSpec, get_model
from fwbench.catalog.sources import get_source
from fwbench.errors import SpecError
from fwbench.launch import describe as describing


@dataclass(frozen=True)
class Prepared:
    """The case fields of a model (the zoo's, or a user's), and what was read of it."""

    fields: dict[str, Any]  # model, model_path, inputs, objective
    spec: ModelSpec
    batch: int | None = None  # the batch its inputs fix (None: any)
    described: dict[str, Any] = field(default_factory=dict)


def is_users(text: str) -> bool:
    """Whether `text` names a model of the user's (not the zoo's, nor a plugin's)."""
    return get_model(text).source != "zoo"


def describe(spec: ModelSpec) -> dict[str, Any]:
    """What the model declares (inputs, parameters, outputs), from the cache or a worker
    of its source's framework."""
    source = get_source(spec.source)
    if source.describe is None:
        return {}
    native = FRAMEWORKS.get(source.native)
    version = native.version() if native is not None else None
    if native is not None and version is None:
        raise SpecError(
            f"model: {spec.name} is {source.label}, read by {native.label}, which is not "
            f"installed here: pip install 'fwbench[{source.native}]'"
        )
    key = description_key(spec)
    kept = cache.read("models", key)
    if _well_formed(kept):
        return kept
    # Absent, or damaged: read again, never trusted.
    found = describing.describe(spec.reference or spec.name)
    cache.write("models", key, found)
    return found


def description_key(spec: ModelSpec) -> str:
    """What a model's description is cached under: the model, and whatever version reads
    it (fwbench's own, its source's framework's, and the libraries' that decide what the
    model declares: timm's, transformers')."""
    source = get_source(spec.source)
    versions = [("fwbench", _installed("fwbench"))]
    native = FRAMEWORKS.get(source.native)
    versions.append((source.native, native.version() if native is not None else None))
    versions += [(library, _installed(library)) for library in source.libraries]
    return "|".join([spec.name, str(spec.reference), *(f"{n}={v}" for n, v in versions)])


def _installed(distribution: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _well_formed(found: Any) -> TypeGuard[dict[str, Any]]:
    """A cache entry of describe's shape: text where text goes, a count or none."""
    if not isinstance(found, dict):
        return False
    texts = all(isinstance(found.get(k, ""), str) for k in ("inputs", "defaults", "outputs"))
    params = found.get("params")
    return texts and (params is None or (isinstance(params, int) and not isinstance(params, bool)))


def prepare(text: str, input_shapes: Sequence[str] = (), objective: str | None = None) -> Prepared:
    """The case fields of the model `text` names. A user's model that takes tensors of its
    own is described, and its inputs are what it declares, completed (or, where it
    declares none, given) by `input_shapes`. One-line SpecErrors for what cannot work."""
    spec = get_model(text)
    # A model whose inputs are written in terms of its dimensions (ModelSpec.inputs): the
    # case makes them from its dims, as it sizes a zoo model's image or tokens.
    if spec.input_kind != TENSORS or spec.inputs:
        if input_shapes or objective:
            given = "--input-shape" if input_shapes else "--objective"
            raise SpecError(
                f"{given}: applies to a model that takes tensors of its own; {spec.name} "
                f"takes {spec.input_kind} input sized by its dimensions "
                f"({', '.join(spec.dims)}: --dim NAME=VALUE), and trains with its own loss"
            )
        zoo_fields: dict[str, Any] = {"model": spec.name if spec.source != "zoo" else text}
        if spec.reference:
            zoo_fields["model_path"] = spec.reference
        return Prepared(zoo_fields, spec)
    if objective is not None and objective not in USER_OBJECTIVES:
        raise SpecError(f"--objective: {objective!r}; valid choices: {', '.join(USER_OBJECTIVES)}")
    try:
        shapes = parse_given(list(input_shapes))
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    found = describe(spec)
    try:
        declared = parse_signature(found["inputs"]) if found.get("inputs") else ()
        defaults = parse_signature(found["defaults"]) if found.get("defaults") else ()
    except ValueError as exc:  # what an older fwbench kept of it, read by today's rules
        raise SpecError(f"model: {spec.name}: its declared inputs: {exc}") from None
    try:
        inputs, batch = merge(declared, shapes, spec.name, defaults)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    fields = {
        "model": spec.name,
        "model_path": spec.reference or None,
        "inputs": format_signature(inputs),
        "objective": objective,
    }
    return Prepared(fields, spec, batch, found)


def batch_size(prepared: Prepared, given: int | None, default: int) -> int:
    """The batch size of its cases: the one given, which a model fixing its batch must
    match; else the fixed one; else `default`."""
    if prepared.batch is None:
        return given if given is not None else default
    if given is not None and given != prepared.batch:
        raise SpecError(
            f"batch_size: {prepared.spec.name} takes a batch of {prepared.batch} only (its "
            f"inputs fix it), not {given}; leave --batch-size out, or export the model with "
            "a dynamic batch"
        )
    return prepared.batch
