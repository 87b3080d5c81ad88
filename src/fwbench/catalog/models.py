"""Model registry: name -> ModelSpec, readable without importing any framework; and
each framework's builders of the zoo's models.

A model is declared once, as what it is (its input, dimensions, objective, optimizer);
how a framework builds it is that framework's: a table of builders registered under
the framework's name for the zoo's names (`register_builders`, fwbench.models.*_zoo), so
a new framework adds its builders without editing the zoo. A model of a plugin's or of
the user's may bring its own builders (`ModelSpec.builders`). Builders import their
framework inside the function body, so registering never loads a framework.

The zoo registers when `fwbench.models` is imported, which `import fwbench` does first,
before any plugin: registration flows down to this table, and every edge is an import
the layer contract sees. Users add models with a module that calls `register(...)`,
found through the `fwbench.models` entry-point group or the FWBENCH_PLUGINS environment
variable (comma-separated module names; fwbench.plugins), see docs/adding-a-model.md.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from fwbench import plugins
from fwbench.catalog.inputs import Signature, format_signature, parse_signature
from fwbench.dimensions import Dimension
from fwbench.errors import SpecError

# Called with the model's dimensions as keywords (e.g. num_classes=1000, input_size=224),
# returns a framework-native model object with random weights.
Builder = Callable[..., Any]


# What a model reads: each kind's input signature (fwbench.catalog.inputs) written in
# the dimensions that size it ({name}: each one a model of the kind must take). Token ids
# are in the framework's index dtype ({index}: PyTorch's int64, Keras' and JAX's int32);
# images are channels-first here, and laid out as each framework computes them
# (InputKind.images). A model of kind "tensors" writes its own (ModelSpec.inputs).
@dataclass(frozen=True)
class InputKind:
    signature: str
    images: bool = False  # its 4-d inputs are NCHW images

    def dims(self) -> tuple[str, ...]:
        """The dimensions its signature is written in."""
        found = (f for _, f, _, _ in string.Formatter().parse(self.signature) if f)
        return tuple(dict.fromkeys(f for f in found if f != "index"))


INPUT_KINDS: dict[str, InputKind] = {
    "image": InputKind("x=Bx3x{input_size}x{input_size}:float32", images=True),
    "tokens": InputKind("ids=Bx{seq_len}:{index}<{vocab_size}"),
    # Translation: source and target token ids.
    "token_pair": InputKind(
        "source=Bx{seq_len}:{index}<{vocab_size};target=Bx{seq_len}:{index}<{vocab_size}"
    ),
    "spectrogram": InputKind("x=Bx{seq_len}x{freq_bins}:float32"),  # time frames x bins
    # Named tensors (fwbench.catalog.inputs; the case's `inputs`): a user's model, as it
    # declares them or the user gives them; or a model whose ModelSpec.inputs writes
    # them in terms of its own dimensions ("x=Bx3x{side}x{side}:float32").
    "tensors": InputKind(""),
}
TENSORS = "tensors"
ZOO = "zoo"  # the source of the built-in models and the plugins' (ModelSpec.source)


# Every dimension a model may take, by name (each model takes a subset, with its own
# defaults: ModelSpec.dims). A plugin declares more with register_dimension: each is then
# a key of Case.dims, a `--dim NAME=VALUE`, a sweep axis and part of the stored record.
class _Dimensions(Mapping[str, Dimension]):
    """Name -> Dimension: the built-in ones, then the plugins' on first use."""

    def __init__(self, entries: tuple[Dimension, ...]) -> None:
        self._entries = {d.name: d for d in entries}

    def __getitem__(self, name: str) -> Dimension:
        plugins.load()
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        plugins.load()
        return iter(list(self._entries))

    def __len__(self) -> int:
        plugins.load()
        return len(self._entries)

    def declared(self) -> dict[str, Dimension]:
        """Those declared so far, loading no plugin (the zoo's models check theirs
        while the package loads, before any plugin may)."""
        return dict(self._entries)


DIMENSIONS = _Dimensions(
    (
        Dimension("input_size", "image side, pixels", maximum=8192, short="{}px"),
        Dimension("seq_len", "sequence length: tokens, or spectrogram frames", short="seq"),
        Dimension("vocab_size", "vocabulary size", minimum=2, maximum=1 << 22, short="v"),
        Dimension("freq_bins", "spectrogram frequency bins", maximum=8192, short="f"),
        Dimension("num_classes", "output classes", minimum=2, maximum=1_000_000, short="c"),
    )
)


def register_dimension(dimension: Dimension) -> Dimension:
    """Declare a model dimension (a plugin's: its models' ModelSpec.dims may then name
    it). A name that is taken by another declaration is refused."""
    found = DIMENSIONS.declared().get(dimension.name)
    if found is not None and found != dimension:
        raise SpecError(
            f"dimension {dimension.name!r} is declared already ({found.description}); "
            "give yours a name of its own"
        )
    if dimension.default is not None:
        raise SpecError(
            f"dimension {dimension.name!r}: a model dimension has no default of its own; "
            "each model gives its default in its dims"
        )
    DIMENSIONS._entries[dimension.name] = dimension
    return dimension


# How the output is trained (and which targets the synthetic data has):
#   classify   logits (batch, num_classes) vs one class per sample: cross-entropy
#   lm         logits (batch, seq_len, vocab) vs the next token at every position
#   ctc        per-frame logits (batch, frames', num_classes), class 0 the blank, vs a label
#              sequence per sample: CTC loss
#   mean       a user's model with no loss of its own: the mean of its floating-point
#              outputs, a synthetic loss whose gradient still runs the whole backward pass
Objective = Literal["classify", "lm", "ctc", "mean"]
LOSSES: dict[str, str] = {
    "classify": "cross-entropy on logits",
    "lm": "cross-entropy on logits at every position (mean over tokens)",
    "ctc": "CTC on per-frame logits, blank = class 0 (mean over the batch)",
    "mean": "synthetic: the mean of the model's floating-point outputs",
}
# What a user's model may train with (`--objective`): the classes or the vocabulary are
# read from its output's last dimension; `mean` is the default, labelled synthetic.
USER_OBJECTIVES: tuple[str, ...] = ("mean", "classify", "lm")


def ctc_label_length(frames: int) -> int:
    """Labels per synthetic CTC target: short enough for any model that keeps at least
    half of its input frames (each label may need a blank frame before it)."""
    return max(1, frames // 8)


@dataclass(frozen=True)
class Optimizer:
    """The optimizer a model trains with, identical in every framework."""

    name: Literal["sgd", "adam", "adamw"] = "sgd"
    learning_rate: float = 0.01
    momentum: float = 0.9  # sgd only
    weight_decay: float = 0.0  # adamw only: decoupled, applied to every weight

    def describe(self) -> str:
        if self.name == "adam":
            return f"Adam(lr={self.learning_rate}, betas=(0.9, 0.999), eps=1e-7)"
        if self.name == "adamw":
            return (
                f"AdamW(lr={self.learning_rate}, betas=(0.9, 0.999), eps=1e-7, "
                f"weight_decay={self.weight_decay})"
            )
        return f"SGD(lr={self.learning_rate}, momentum={self.momentum})"


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    input_kind: str
    # Its own builders, by framework (a plugin's or a user's model); the zoo's models
    # have none: each framework registers its builders for them (register_builders).
    builders: dict[str, Builder] = field(default_factory=dict, repr=False)
    description: str = ""
    # Image models may give only these two; `dims` then defaults to side and classes.
    default_input_size: int = 224
    min_input_size: int = 1
    # Default value of every dimension the model takes; none other applies to it.
    dims: Mapping[str, int] = field(default_factory=dict)
    min_dims: Mapping[str, int] = field(default_factory=dict)
    objective: Objective = "classify"
    optimizer: Optimizer = field(default_factory=Optimizer)
    # Two implementations of one network (e.g. a fused LSTM layer and a cell loop) share a
    # workload name: fwbench compares them like two modes of one framework.
    workload: str = ""
    implementation: str = ""
    # A model of named tensors sized by its own dimensions: its input signature with
    # each dimension written {name} ("x=Bx3x{side}x{side}:float32"); a case's `inputs`
    # is made from it and the case's dims. Empty for every other model.
    inputs: str = ""
    # Positions a generation may fill (prompt and new tokens): a causal language model's
    # context. None: the model does not generate (task generate refuses it).
    context: int | None = None
    # Per builder (keyed as `builders`), the positions up to which the frameworks that
    # build from it compute what the model's own library computes, and why no further (a
    # sliding window a converter does not carry over): a case that fills more is
    # refused in them before any work.
    alike_within: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    # Where it comes from (fwbench.catalog.sources): the zoo (or a plugin), or a user's
    # file, callable or library architecture; `reference` resolves it again in a worker
    # (a path or module:function; "" when the name does), `digest` is the content hash
    # of its file or config, part of its name (two files never share one).
    source: str = ZOO
    reference: str = ""
    digest: str | None = None

    def __post_init__(self) -> None:
        if self.input_kind not in INPUT_KINDS:
            raise SpecError(
                f"model {self.name!r}: unknown input kind {self.input_kind!r}; "
                f"valid choices: {', '.join(INPUT_KINDS)}"
            )
        if not self.dims and self.input_kind != TENSORS:
            if self.input_kind != "image":
                raise SpecError(f"model {self.name!r}: give its dims (default dimensions)")
            dims = {"input_size": self.default_input_size, "num_classes": 1000}
            object.__setattr__(self, "dims", dims)
        if not self.min_dims and "input_size" in self.dims:
            object.__setattr__(self, "min_dims", {"input_size": self.min_input_size})
        declared = DIMENSIONS.declared()
        unknown = sorted(set(self.dims) - set(declared))
        if unknown:
            raise SpecError(
                f"model {self.name!r}: no dimension {unknown[0]!r} is declared "
                f"(register_dimension, before the model); declared: {', '.join(declared)}"
            )
        needed = INPUT_KINDS[self.input_kind].dims()
        missing = [d for d in needed if d not in self.dims]
        if missing:
            raise SpecError(
                f"model {self.name!r}: dims must give {', '.join(needed)}"
                f" and may add num_classes; got {', '.join(self.dims)}"
            )
        if self.inputs and self.input_kind != TENSORS:
            raise SpecError(f"model {self.name!r}: only a model of tensors declares inputs")
        if self.inputs:
            try:
                self.signature(self.dims)
            except (KeyError, IndexError, ValueError) as exc:
                raise SpecError(
                    f"model {self.name!r}: its inputs {self.inputs!r} do not resolve with "
                    f"its dims: {exc}"
                ) from None
        if not self.workload:
            object.__setattr__(self, "workload", self.name)

    def builder(self, framework: str) -> Builder:
        """How `framework` builds it: its own builder, else the one the framework (or the
        framework whose models it runs: its entry's `models_from`) registered for it."""
        from fwbench.catalog.frameworks import FRAMEWORKS

        info = FRAMEWORKS.get(framework)
        source = info.models_from if info is not None and info.models_from else framework
        found = self.builders.get(source) or _BUILDERS.get(source, {}).get(self.name)
        if found is None:
            raise SpecError(
                f"model {self.name!r} has no {framework} implementation; "
                f"it has: {', '.join(self.built_by()) or 'none'}"
            )
        return found

    def builds(self, framework: str) -> bool:
        """Whether `framework` implements it (`builder` would find one)."""
        try:
            self.builder(framework)
        except SpecError:
            return False
        return True

    def built_by(self) -> list[str]:
        """The names its builders are registered under: its own, and the frameworks'
        that registered one for it (a runtime that builds from another framework's
        models is not among them: its entry's `models_from` names the one it uses)."""
        found = dict.fromkeys(self.builders)
        found.update(dict.fromkeys(k for k, table in _BUILDERS.items() if self.name in table))
        return sorted(found)

    def build(self, framework: str, dims: Mapping[str, int]) -> Any:
        return self.builder(framework)(**dims)

    def training(self) -> dict[str, str]:
        """How the model trains, recorded with each result's settings."""
        return {"loss": LOSSES[self.objective], "optimizer": self.optimizer.describe()}

    def minimum(self, dim: str) -> int:
        found = DIMENSIONS.declared().get(dim)
        declared = found.minimum if found is not None else 1
        return max(self.min_dims.get(dim, declared), declared)

    def signature(self, dims: Mapping[str, int]) -> str:
        """Its inputs (a model of tensors that declares them) for `dims`, as a case holds
        them (fwbench.catalog.inputs: the batch written B); "" for any other model."""
        if not self.inputs:
            return ""
        return format_signature(parse_signature(self.inputs.format(**dims)))

    def input_signature(self, dims: Mapping[str, int], index: str = "int64") -> Signature:
        """What it reads at `dims`: its own inputs, or its kind's, token ids in `index`."""
        if self.inputs:
            return parse_signature(self.inputs.format(**dims))
        return parse_signature(INPUT_KINDS[self.input_kind].signature.format(index=index, **dims))


_MODELS: dict[str, ModelSpec] = {}
# Each framework's builders of the zoo's models: framework -> model name -> builder.
_BUILDERS: dict[str, dict[str, Builder]] = {}


def register(spec: ModelSpec) -> ModelSpec:
    """Add a model (the zoo's modules, and plugins). A name that is taken is refused: a
    plugin's `resnet18` would silently be one of the two."""
    if spec.name != spec.name.lower():
        # A command's --model is looked up lower-cased: the model could never be chosen.
        raise SpecError(
            f"model {spec.name!r}: a model's name is lower case; register it as "
            f"{spec.name.lower()!r}"
        )
    found = _MODELS.get(spec.name)
    if found is not None and found is not spec:
        raise SpecError(
            f"model {spec.name!r} is registered already ({found.family}: "
            f"{found.description or found.name}); give yours a name of its own"
        )
    _MODELS[spec.name] = spec
    return spec


def register_builders(framework: str, builders: Mapping[str, Builder]) -> None:
    """How `framework` builds models declared elsewhere (the zoo's, or a plugin's), by
    model name: its builders module calls this once. A model it names that no one
    declares is fine (a plugin's, not loaded here); a builder registered twice for one
    model is refused, as a second `resnet18` would be."""
    table = _BUILDERS.setdefault(framework, {})
    taken = sorted(n for n, b in builders.items() if n in table and table[n] is not b)
    if taken:
        raise SpecError(
            f"{framework} builders for {', '.join(taken)} are registered already; "
            "register each model's builder once"
        )
    table.update(builders)


def _load() -> None:
    # Each time, not once: it raises again while a plugin is broken.
    plugins.load()


def all_dimensions() -> dict[str, Dimension]:
    """Every model dimension declared: the built-in ones, then the loaded plugins'."""
    return dict(DIMENSIONS)


def all_models() -> dict[str, ModelSpec]:
    _load()
    return dict(_MODELS)


# Users' models resolved in this process (fwbench.catalog.sources), by the text given and
# by their name: a worker resolves its case's again from its reference.
_RESOLVED: dict[str, ModelSpec] = {}
# How a text that names no registered model becomes one: set by fwbench.catalog.sources
# when it loads (the model sources register into this table; it imports none of them).
_resolver: Callable[[str, Sequence[str]], ModelSpec] | None = None


def set_resolver(resolve: Callable[[str, Sequence[str]], ModelSpec]) -> None:
    """Called once by the model sources: `resolve(text, zoo names)` makes a user's model
    of a text, or raises SpecError naming what a text may be."""
    global _resolver
    _resolver = resolve


def get_model(name: str) -> ModelSpec:
    """A model of the zoo (or a plugin's) by name, or a user's model by what names it (a
    file, a library architecture: fwbench.catalog.sources)."""
    models = all_models()
    if not name.strip():
        # "" is the current folder to a path: it was read as a SavedModel without one.
        raise SpecError("model: empty; give a model name (see `fwbench models`) or a file")
    key = name.lower()
    if key in models:
        return models[key]
    if name in _RESOLVED:
        return _RESOLVED[name]
    if _resolver is None:
        raise SpecError(f"unknown model {name!r}; valid choices: {', '.join(sorted(models))}")
    spec = _resolver(name, sorted(models))
    _RESOLVED[name] = _RESOLVED[spec.name] = spec
    return spec


def model_of(name: str, reference: str | None) -> ModelSpec:
    """A case's model: by its name, or, for a user's model, resolved again from its
    reference (a path or module:function), which must still be the model the name says
    (its content hash is in the name: a file changed since would be other work)."""
    if not reference:
        return get_model(name)
    spec = get_model(reference)
    if spec.name != name:
        raise SpecError(
            f"model {name}: {reference} is now {spec.name}; the file changed since the case "
            "was made (measure it again as a new model)"
        )
    return spec


def find_model(name: str) -> ModelSpec | None:
    """The spec, or None when its plugin is not loaded (e.g. reading old results), or a
    user's model not resolved in this process."""
    return all_models().get(name.lower()) or _RESOLVED.get(name)
