"""Model sources: what a `--model` names, besides a model of the zoo.

A source turns the text a user gives (`./net.onnx`, `timm:convnext_tiny`, `hf:gpt2`,
`torch:nets.py:build`, ...) into one ModelSpec (fwbench.catalog.models): its identity (a
name that carries the content hash of its file or config, so two different files never
share it), how a worker gets it again (`reference`), the builders of each framework that
can run it natively, and whether it declares its inputs. Which frameworks can run a
source, and why the others cannot, is data on its entry, checked before any work.

A source is one module of `fwbench.models.sources` (or a plugin's) and one
`register_source` call. Its entry here names that module; the module is imported by
name (as the zoo's are), so this table imports nothing above it. Resolving a text is
pure: files are hashed, nothing imports a framework; what only the framework can read
(the declared inputs, the parameter count) the source's `describe` reads in a worker.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fwbench import plugins
from fwbench.errors import SpecError

if TYPE_CHECKING:
    from fwbench.catalog.models import ModelSpec


@dataclass(frozen=True)
class Source:
    name: str  # how results name it: "onnx_file"
    label: str  # how messages name it: "an ONNX file"
    syntax: str  # how a user writes it: "PATH.onnx"
    # Does this `--model` text name a model of this source (never raises).
    claims: Callable[[str], bool]
    # The text as one ModelSpec (pure: a missing file, a bad name raise SpecError).
    resolve: Callable[[str], ModelSpec]
    # The framework whose worker reads what a model declares (inputs, parameters).
    native: str
    # The frameworks that run it, each with how ("natively", "exported to ONNX by
    # torch.onnx"), and those that cannot, each with why; any other framework cannot,
    # with a reason that names those that can.
    runs: tuple[tuple[str, str], ...]
    cannot: tuple[tuple[str, str], ...] = ()
    # Tasks beyond inference its models may run (the task's name -> why not, for those
    # it refuses): a SavedModel's signature cannot be trained, for one.
    refuses: tuple[tuple[str, str], ...] = ()
    # Modes a framework cannot run it in: (framework, modes, why).
    mode_limits: tuple[tuple[str, tuple[str, ...], str], ...] = ()
    # Reads, in a worker of `native`, what the model declares: a dict with `inputs`
    # (canonical signature text, "" when it declares none), `params` and `outputs`.
    describe: Callable[[ModelSpec], dict[str, Any]] | None = None
    example: str = ""

    def can(self, framework: str) -> tuple[bool, str]:
        """Whether `framework` runs this source's models, and how, or why not."""
        runs = dict(self.runs)
        if framework in runs:
            return True, runs[framework]
        why = dict(self.cannot).get(framework)
        if why is None:
            why = f"{self.label} runs on {', '.join(runs)} only"
        return False, why


_SOURCES: dict[str, Source] = {}
_loaded = False
# The built-in sources, in the order they are asked: the first that claims a text has it.
_BUILT_IN = (
    "torch_callable",
    "torch_export",
    "onnx_file",
    "timm_arch",
    "hf",
    "keras_model",
    "twins",
    "saved_model",  # any folder (after hf:DIR): one that is not a SavedModel is told so
)


def register_source(source: Source) -> Source:
    """Add a source (a built-in module of fwbench.models.sources, or a plugin's)."""
    _SOURCES[source.name] = source
    return source


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        # The built-ins in their order, whichever was imported first (an adapter may
        # import a source's module for its constants): the first that claims a text has
        # it, so the order is part of what a text means. Each module's entry is its
        # SOURCE; what was registered otherwise (a plugin's) follows them.
        early = dict(_SOURCES)
        _SOURCES.clear()
        for module in _BUILT_IN:
            found = importlib.import_module(f"fwbench.models.sources.{module}")
            source = getattr(found, "SOURCE", None)
            if isinstance(source, Source):
                _SOURCES[source.name] = source
        for name, source in early.items():
            _SOURCES.setdefault(name, source)
    plugins.load()


def all_sources() -> dict[str, Source]:
    _load()
    return dict(_SOURCES)


def get_source(name: str) -> Source:
    sources = all_sources()
    if name not in sources:
        raise SpecError(f"unknown model source {name!r}; valid choices: {', '.join(sources)}")
    return sources[name]


def source_of(text: str) -> Source | None:
    """The source that claims `text`, or None (a zoo name, or nothing fwbench reads)."""
    for source in all_sources().values():
        if source.claims(text):
            return source
    return None


def syntaxes() -> str:
    """Every source's syntax, for messages and help."""
    return ", ".join(s.syntax for s in all_sources().values())
