"""A model's input signature: its named input tensors, their shapes and dtypes.

The zoo's models take one of a few kinds of input, each a signature written in the
case's dimensions (`catalog.models.INPUT_KINDS`); every framework makes a case's inputs
from its signature (frameworks.base.synthetic_arrays). A user's model declares its
inputs (a Keras model's inputs, an ONNX graph's, an exported program's example inputs, a
SavedModel's signature, a transformers config), or the user gives them (`--input-shape`);
a case holds them in one canonical text (`Case.inputs`), part of its identity:

    name=Bx3x224x224:float32;ids=Bx128:int64<50257

`B` is the batch dimension (the case's batch size); every other dimension is a number.
An integer input's values are drawn from [0, high) (`<high`: a vocabulary, or 2 when
nothing says, which indexes any table). Pure: no framework.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fwbench.errors import SpecError

BATCH = "B"
FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INT_DTYPES = ("int64", "int32", "int8", "uint8", "bool")
DTYPES = FLOAT_DTYPES + INT_DTYPES
# An integer input nothing bounds takes values below this: 0 and 1 index any table.
DEFAULT_HIGH = 2
MAX_RANK = 8
MAX_ELEMENTS = 1 << 31  # one input of a sample, at most (8 GiB of float32)
_NAME = re.compile(r"[A-Za-z0-9_.:/\-]+")

_DIM = re.compile(r"^(?:[0-9]+|[Bb?]|[Nn])$")


@dataclass(frozen=True)
class TensorSpec:
    """One input: its name, its shape (BATCH for the batch dimension, None for a
    dimension the model leaves open and nothing has given yet) and dtype."""

    name: str
    shape: tuple[int | str | None, ...]
    dtype: str = "float32"
    high: int | None = None  # integer inputs: values in [0, high)

    @property
    def concrete(self) -> bool:
        """Every dimension known (the batch counts as known: the case gives it)."""
        return all(d is not None for d in self.shape)

    def dims_text(self) -> str:
        return "x".join("?" if d is None else str(d) for d in self.shape)

    def text(self) -> str:
        bound = f"<{self.high}" if self.high is not None and self.dtype in INT_DTYPES else ""
        return f"{self.name}={self.dims_text()}:{self.dtype}{bound}"

    def sized(self, batch: int) -> tuple[int, ...]:
        """Its shape for a batch of `batch` samples (every dimension known)."""
        if not self.concrete:
            raise ValueError(f"input {self.name}: dimensions {self.dims_text()} are not all given")
        return tuple(batch if d == BATCH else int(d) for d in self.shape)  # type: ignore[arg-type]

    def value_high(self) -> int:
        return self.high if self.high is not None else DEFAULT_HIGH


Signature = tuple[TensorSpec, ...]


class SignatureError(SpecError, ValueError):
    """Inputs a model declares that fwbench cannot feed: one line, as bad input."""


def format_signature(inputs: Sequence[TensorSpec]) -> str:
    """The canonical text of `inputs`; a SignatureError naming an input fwbench cannot feed
    (what a model's file declares is checked here, where its names are still whole)."""
    for t in inputs:
        if not _NAME.fullmatch(t.name):
            raise SignatureError(
                f"its input {t.name!r} has a name fwbench cannot write (letters, digits and "
                "_ . : / - only): rename the input"
            )
        if not t.shape:
            raise SignatureError(
                f"its input {t.name!r} is a scalar (rank 0): fwbench feeds batches, each "
                "input's first dimension the batch"
            )
        if len(t.shape) > MAX_RANK:
            raise SignatureError(
                f"its input {t.name!r} has {len(t.shape)} dimensions; at most {MAX_RANK}"
            )
        known = 1
        for d in t.shape:
            known *= d if isinstance(d, int) else 1
        if known > MAX_ELEMENTS:
            raise SignatureError(
                f"its input {t.name!r} ({t.dims_text()}) is {known:,} elements per sample; "
                f"at most {MAX_ELEMENTS:,}"
            )
    return ";".join(t.text() for t in inputs)


def parse_signature(text: str) -> Signature:
    """The canonical text back into tensors (what `format_signature` wrote, or a case's
    `inputs` read from a file: checked, ValueError naming the problem)."""
    found = []
    for part in text.split(";"):
        name, sep, rest = part.partition("=")
        if not sep:
            raise ValueError(f"inputs: {part!r} is not NAME=SHAPE:DTYPE")
        found.append(_tensor(name.strip(), rest.strip(), "inputs"))
    _unique(found, "inputs")
    return tuple(found)


def parse_given(values: Sequence[str]) -> dict[str | None, TensorSpec]:
    """`--input-shape [NAME=]1x3x224x224[:dtype]` values: name (None when left out) ->
    the tensor given. The leading dimension is the batch: `B` takes --batch-size, a number
    fixes it."""
    found: dict[str | None, TensorSpec] = {}
    for value in values:
        text = value.strip()
        name: str | None = None
        if "=" in text:
            given_name, _, text = text.partition("=")
            name = given_name.strip()
            if not name:
                raise ValueError(f"input_shape: {value!r} has an empty name before '='")
        if name in found:
            what = f"input {name!r}" if name else "the unnamed input"
            raise ValueError(f"input_shape: {what} given twice")
        tensor = _tensor(name or "input", text.strip(), "input_shape", leading_batch=True)
        found[name] = tensor
    if None in found and len(found) > 1:
        raise ValueError(
            "input_shape: name every input when giving several (NAME=SHAPE, e.g. ids=Bx128:int64)"
        )
    return found


def _tensor(name: str, text: str, field: str, leading_batch: bool = False) -> TensorSpec:
    example = "1x3x224x224:float32" if field == "input_shape" else "x=Bx3x224x224:float32"
    if not name or not _NAME.fullmatch(name):
        raise ValueError(f"{field}: {name!r} is not an input name (letters, digits, _ . : / -)")
    dims, _, kind = text.partition(":")
    dtype, _, high_text = kind.partition("<")
    dtype = dtype.strip().lower() or "float32"
    if dtype not in DTYPES:
        raise ValueError(f"{field}: dtype {dtype!r} of {name}; valid choices: {', '.join(DTYPES)}")
    high: int | None = None
    if high_text:
        if dtype not in INT_DTYPES or not high_text.strip().isdigit() or int(high_text) < 1:
            raise ValueError(f"{field}: {text!r}: '<N' bounds an integer input by N >= 1")
        high = int(high_text)
    parts = [d.strip() for d in dims.split("x")] if dims.strip() else []
    if not parts or len(parts) > MAX_RANK or not all(_DIM.match(p) for p in parts):
        raise ValueError(
            f"{field}: {dims!r} is not a shape of up to {MAX_RANK} dimensions "
            f"(numbers joined by x, e.g. {example})"
        )
    shape: list[int | str | None] = []
    for i, part in enumerate(parts):
        if part in ("B", "b", "N", "n") or (part == "?" and i == 0 and leading_batch):
            if i != 0:
                raise ValueError(f"{field}: {dims!r}: only the leading dimension is the batch (B)")
            shape.append(BATCH)
        elif part == "?":
            shape.append(None)
        else:
            size = int(part)
            if size < 1:
                raise ValueError(f"{field}: {dims!r}: a dimension of {size}; each must be >= 1")
            shape.append(size)
    known = [d for d in shape if isinstance(d, int)]
    total = 1
    for d in known:
        total *= d
    if total > MAX_ELEMENTS:
        raise ValueError(
            f"{field}: {dims!r} is {total:,} elements per input; at most {MAX_ELEMENTS:,}"
        )
    return TensorSpec(name, tuple(shape), dtype, high)


def _unique(tensors: Sequence[TensorSpec], field: str) -> None:
    names = [t.name for t in tensors]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"{field}: input {dupes[0]!r} appears twice")


def merge(
    declared: Signature,
    given: dict[str | None, TensorSpec],
    model: str,
    defaults: Signature = (),
) -> tuple[Signature, int | None]:
    """The model's declared inputs with what `--input-shape` gave, and the batch they fix
    (None: any; the case's batch size fills B). The leading dimension of every input is
    its batch. A given shape fills the dimensions the model leaves open and must agree
    with those it fixes; a model that declares nothing takes the given ones. ValueError,
    naming the input and what would work, for a name the model lacks, a shape it refuses,
    a dimension left open, or inputs whose batches disagree. `defaults` fill what is
    still open after that (an architecture's usual image size: any other fits it too)."""
    if not declared:
        if not given:
            raise ValueError(
                f"model: {model} does not declare its inputs; give them with --input-shape "
                "[NAME=]1x3x224x224[:dtype] (repeat for several)"
            )
        declared = tuple(
            TensorSpec(t.name, (BATCH, *(None for _ in t.shape[1:])), t.dtype, t.high)
            for t in given.values()
        )
        given = {t.name: t for t in given.values()}
    by_name = {t.name: t for t in declared}
    if None in given:
        if len(declared) > 1:
            raise ValueError(
                f"input_shape: {model} takes {len(declared)} inputs ({', '.join(by_name)}); "
                "name each (NAME=SHAPE)"
            )
        given = {declared[0].name: given[None]}
    for name in given:
        if name not in by_name:
            raise ValueError(
                f"input_shape: {model} has no input {name!r}; its inputs: {', '.join(by_name)}"
            )
    out: list[TensorSpec] = []
    batches: dict[str, int] = {}
    for tensor in declared:
        found = given.get(tensor.name)
        shape = list(tensor.shape)
        if found is not None and len(found.shape) != len(shape):
            raise ValueError(
                f"input_shape: {model}'s input {tensor.name} has {len(shape)} dimensions "
                f"({tensor.dims_text()}); {found.dims_text()} has {len(found.shape)}"
            )
        for i, want in enumerate(tensor.shape):
            got = found.shape[i] if found is not None else None
            if i == 0:
                for fixed in (want, got):
                    clash = (
                        isinstance(fixed, int) and batches.setdefault(tensor.name, fixed) != fixed
                    )
                    if clash:
                        raise ValueError(
                            f"input_shape: {model}'s input {tensor.name} takes a batch of "
                            f"{want}, not {got}"
                        )
                shape[0] = BATCH
            elif want is None or want == BATCH:
                shape[i] = got if isinstance(got, int) else None
            elif isinstance(got, int) and got != want:
                raise ValueError(
                    f"input_shape: {model}'s input {tensor.name} is {tensor.dims_text()}: "
                    f"dimension {i + 1} is fixed at {want}, not {got}"
                )
        usual = next((t for t in defaults if t.name == tensor.name), None)
        if usual is not None and len(usual.shape) == len(shape):
            shape = [d if d is not None else usual.shape[i] for i, d in enumerate(shape)]
        dtype = found.dtype if found is not None and found.dtype != "float32" else tensor.dtype
        high = (found.high if found is not None else None) or tensor.high
        merged = TensorSpec(tensor.name, tuple(shape), dtype, high)
        if not merged.concrete:
            hint = "x".join("N" if d is None else str(d) for d in merged.shape)
            raise ValueError(
                f"input_shape: {model}'s input {tensor.name} has dimensions it leaves open "
                f"({merged.dims_text()}); give them, e.g. --input-shape {tensor.name}={hint} "
                "with numbers for N"
            )
        out.append(merged)
    fixed_batches = set(batches.values())
    if len(fixed_batches) > 1:
        raise ValueError(f"inputs: {model}'s inputs fix different batches ({batches})")
    return tuple(out), (fixed_batches.pop() if fixed_batches else None)


def arrays(inputs: Signature, batch: int, seed: int = 0) -> list[Any]:
    """Synthetic values for `inputs` at `batch` samples, as NumPy arrays: the same in
    every framework (one seed, one generator), so that their outputs can be compared.
    Floats are standard normal (bfloat16 inputs are made float32: NumPy has no bfloat16;
    the framework casts them); integers are uniform in [0, high)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for tensor in inputs:
        shape = tensor.sized(batch)
        if tensor.dtype in FLOAT_DTYPES:
            dtype = "float32" if tensor.dtype == "bfloat16" else tensor.dtype
            out.append(rng.standard_normal(shape, dtype=np.float32).astype(dtype))
        elif tensor.dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        else:
            out.append(rng.integers(0, tensor.value_high(), shape).astype(tensor.dtype))
    return out
