"""Dimensions: the named sizes of a case's work, declared once each.

A model's dimensions (an image's side, a sequence's length, a vocabulary, classes) are
declared in the model catalog (fwbench.catalog.models.register_dimension) and a task's
own (a generation's new tokens) on its Task; both are this one kind of declaration. A
declared dimension is a key of a case's mapping (`Case.dims`, `Case.task_dims`), a
`--dim NAME=VALUE` (`--task-dims`) of the CLI, a sweep axis of its name, and part of
the stored record; nothing else names it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dimension:
    name: str  # lower_snake_case: the sweep key and the NAME of --dim NAME=VALUE
    description: str
    # What a case takes when it is left out. A model's dimension has none of its own:
    # each model that takes it gives its default (ModelSpec.dims).
    default: int | None = None
    minimum: int = 1
    maximum: int = 1 << 20
    # How a case's shape writes it: a prefix ("seq" -> `seq128`), or a pattern with {}
    # ("{}px" -> `224px`); the name if empty.
    short: str = ""
    # The field its errors name: a model's dimension is itself ("seq_len: ..."), a
    # task's is an entry of task_dims ("task_dims: new_tokens=0 ...").
    field: str = ""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"dimension {self.name!r}: use a lower_snake_case name")
        if self.minimum > self.maximum:
            raise ValueError(f"dimension {self.name}: its minimum is above its maximum")
        if self.default is not None and not self.minimum <= self.default <= self.maximum:
            raise ValueError(f"dimension {self.name}: its default is outside its range")

    def check(self, value: object) -> int:
        """The value as a case holds it, or ValueError naming the dimension and its range
        (a model's own minimum, above the dimension's, is the case's to check)."""
        where = f"{self.field}: {self.name}=" if self.field else f"{self.name}: "
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{where}{value!r} is not a whole number")
        if not self.minimum <= value <= self.maximum:
            raise ValueError(
                f"{where}{value} is out of range (valid: {self.minimum} to {self.maximum})"
            )
        return value

    def label(self, value: int) -> str:
        """How a case's shape writes the value: `224px`, `seq128`, `new32`."""
        short = self.short or self.name
        return short.format(value) if "{}" in short else f"{short}{value}"
