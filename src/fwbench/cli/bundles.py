"""Options that travel together, declared once as a dataclass and given to a command as one
value: `run`, `sweep`, `tune`, `explain` and `serve` take the same workload (and `run` and
`sweep` the same timing) flags without copying them through their signatures.

A bundle is a frozen dataclass whose fields are typed with the options of cli/options.py
(an `Annotated[..., typer.Option(...)]`) and default to the option's default. A command
names a parameter of the bundle's type and decorates itself with `takes`: typer then sees
the bundle's fields as the command's own options, and the command receives one instance.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Taken:
    """How a command takes a bundle: the fields it leaves out (their defaults are used)
    and the fields whose option it declares otherwise (annotation, default)."""

    bundle: type
    omit: frozenset[str] = frozenset()
    replace: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)


def options_of(taken: Taken) -> list[inspect.Parameter]:
    """The bundle's fields as a command's keyword options, in declaration order."""
    hints = typing.get_type_hints(taken.bundle, include_extras=True)
    unknown = (set(taken.omit) | set(taken.replace)) - set(hints)
    if unknown:
        # A programming error (a renamed field), caught by any test that builds the CLI.
        raise TypeError(f"{taken.bundle.__name__} has no field {sorted(unknown)}")
    params = []
    for f in dataclasses.fields(taken.bundle):
        if f.name in taken.omit:
            continue
        annotation, default = taken.replace.get(f.name, (hints[f.name], f.default))
        params.append(
            inspect.Parameter(
                f.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
            )
        )
    return params


def take(
    bundle: type, omit: Iterable[str] = (), replace: Mapping[str, tuple[Any, Any]] | None = None
) -> Taken:
    return Taken(bundle, frozenset(omit), dict(replace or {}))


def takes(**bundles: Taken | type) -> Callable[[F], F]:
    """Give a command its bundles: each keyword names a parameter of the command, which
    receives the bundle built from the options its fields became."""

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        taken = {name: b if isinstance(b, Taken) else Taken(b) for name, b in bundles.items()}
        missing = set(taken) - set(signature.parameters)
        if missing:
            raise TypeError(f"{func.__name__} has no parameter {sorted(missing)}")
        expanded: dict[str, list[inspect.Parameter]] = {
            name: options_of(t) for name, t in taken.items()
        }
        params: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            # Keyword-only: a bundle's defaulted options may come before a plain option
            # that has none, and typer passes every option by name.
            if param.name in expanded:
                params += expanded[param.name]
            else:
                params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
        names = [p.name for p in params]
        clash = {n for n in names if names.count(n) > 1}
        if clash:
            raise TypeError(f"{func.__name__}: options given twice: {sorted(clash)}")

        @functools.wraps(func)
        def command(**given: Any) -> Any:
            for name, t in taken.items():
                fields = {p.name: given.pop(p.name) for p in expanded[name]}
                given[name] = t.bundle(**fields)
            return func(**given)

        command.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params} | {
            "return": signature.return_annotation
        }
        return typing.cast(F, command)

    return decorate
