"""Model sources: what a `--model` names, besides a model of the zoo.

A source turns the text a user gives (`./net.onnx`, `timm:convnext_tiny`, `hf:gpt2`,
`torch:nets.py:build`, ...) into one ModelSpec (fwbench.catalog.models): its identity (a
name that carries the content hash of its file or config, so two different files never
share it), how a worker gets it again (`reference`), the builders of each framework that
can run it natively, and whether it declares its inputs. Which frameworks can run a
source, and why the others cannot, is data on its entry, checked before any work.

A source is one module of `fwbench.models.sources` (or a plugin's) that reads it
(`claims`, `resolve` and, where the model declares something, `describe`) and one entry:
the built-ins' are the table below, a plugin's a `register_source` call. An entry names
its module; the built-ins' are loaded with the zoo (`import fwbench` imports
`fwbench.models`), a plugin's is imported by name when a text is first asked about, so
this table imports nothing above it and what it declares is readable without reading
any model. This module resolves a text that names no registered model
(fwbench.catalog.models.get_model asks it, through `set_resolver`). Resolving a text is
pure: files are hashed, nothing imports a framework; what only the framework can read
(the declared inputs, the parameter count) `describe` reads in a worker.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from fwbench import plugins
from fwbench.catalog import models
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.tasks.train import TRAIN


@dataclass(frozen=True)
class Source:
    name: str  # how results name it: "onnx_file"
    label: str  # how messages name it: "an ONNX file"
    syntax: str  # how a user writes it: "PATH.onnx"
    # The module that reads it: a built-in's name under fwbench.models.sources, or a
    # plugin's dotted path. It defines `claims(text) -> bool` (does this `--model` text
    # name a model of this source; never raises), `resolve(text) -> ModelSpec` (pure: a
    # missing file, a bad name raise SpecError) and, where its models declare inputs or
    # parameters, `describe(spec) -> dict` (run in a worker of `native`: `inputs`, the
    # canonical signature text or "", `params` and `outputs`).
    module: str
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
    example: str = ""
    # What code of the model's author runs when fwbench reads or runs it ("" where the
    # model is read as data), and, where only some of its syntaxes run code, the prefix
    # of those (a `keras:module:function` does; a `.keras` file is data).
    executes: str = ""
    executes_when: str = ""
    # Distributions besides `native`'s whose version changes what a model declares (its
    # default input size, its parameters): a description cached under another version
    # of one is read again.
    libraries: tuple[str, ...] = ()

    def runs_code(self, spec: ModelSpec) -> str:
        """What of its author's code runs for `spec`, or "" (read as data)."""
        if self.executes_when and not (spec.reference or "").startswith(self.executes_when):
            return ""
        return self.executes

    def _code(self) -> ModuleType:
        dotted = self.module if "." in self.module else f"fwbench.models.sources.{self.module}"
        # A built-in's module is loaded with the zoo; a plugin's by its dotted name.
        return sys.modules.get(dotted) or importlib.import_module(dotted)

    def claims(self, text: str) -> bool:
        return bool(self._code().claims(text))

    def resolve(self, text: str) -> ModelSpec:
        """The text as one ModelSpec, marked as this source's."""
        spec: ModelSpec = self._code().resolve(text)
        return dataclasses.replace(spec, source=self.name)

    @property
    def describe(self) -> Callable[[ModelSpec], dict[str, Any]] | None:
        found: Callable[[ModelSpec], dict[str, Any]] | None = getattr(
            self._code(), "describe", None
        )
        return found

    def can(self, framework: str, spec: ModelSpec | None = None) -> tuple[bool, str]:
        """Whether `framework` runs this source's models (`spec`, where given: this one of
        them), and how, or why not. A source whose frameworks depend on the model (which
        architectures keras-hub reads) says so per model: its module's
        `can_run(spec, builder)`, None where its entry's table decides."""
        runs = dict(self.runs)
        if framework in runs:
            refine = getattr(self._code(), "can_run", None) if spec is not None else None
            if refine is not None:
                from fwbench.catalog.frameworks import FRAMEWORKS

                info = FRAMEWORKS.get(framework)
                builder = info.models_from if info is not None and info.models_from else framework
                found: tuple[bool, str] | None = refine(spec, builder)
                if found is not None:
                    return found
            return True, runs[framework]
        why = dict(self.cannot).get(framework)
        if why is None:
            why = f"{self.label} runs on {', '.join(runs)} only"
        return False, why


# How the runtimes get a PyTorch source's model: as they get the zoo's.
_RUNS_TORCH = (
    ("torch", "natively, in every mode"),
    ("onnxruntime", "exported to ONNX by torch.onnx (as the zoo's models)"),
    ("openvino", "exported to ONNX by torch.onnx (as the zoo's models)"),
)
_CANNOT_TORCH = (
    ("tensorflow", "a PyTorch model runs on PyTorch and the runtimes it exports to"),
    ("keras-jax", "a PyTorch model runs on PyTorch and the runtimes it exports to"),
    ("keras-torch", "a Keras 3 model runs there; this is a plain PyTorch module"),
)
# A transformers decoder on Keras 3: keras-hub reads the same checkpoint PyTorch does.
_KERAS_HUB = "keras-hub's CausalLM, from the same safetensors weights as PyTorch's"
# The runtimes' way to a Keras model: loaded on Keras' PyTorch backend, exported by
# torch.onnx.
_KERAS_EXPORTED = (
    "loaded on Keras' PyTorch backend and exported to ONNX by torch.onnx (as Keras' own "
    "export(format='onnx') does there, and as the zoo's models are)"
)
_NOT_KERAS = (
    "a SavedModel is a traced TensorFlow graph, not a Keras model: Keras' other backends "
    "cannot run it (pass the .keras file to compare them)"
)

# What a source that imports the user's file runs.
_PYTHON = "the file's Python code: its module is imported and the function called"

# The built-in sources, in the order they are asked: the first that claims a text has
# it, so the order is part of what a text means.
_BUILT_IN = (
    Source(
        name="torch_callable", module="torch_callable",
        label="a PyTorch module from a function",
        syntax="torch:module:function", example="torch:nets.py:build",
        native="torch", runs=_RUNS_TORCH, cannot=_CANNOT_TORCH, executes=_PYTHON,
    ),
    Source(
        name="flax_callable", module="flax_callable",
        label="a Flax NNX module from a function",
        syntax="flax:module:function", example="flax:nets.py:build",
        native="flax",
        runs=(("flax", "natively, in every mode (jit, nnx-jit, eager)"),),
        cannot=tuple(
            (fw, "a Flax NNX module runs on Flax; no other framework reads it")
            for fw in ("torch", "tensorflow", "keras-jax", "keras-torch")
        ),
        executes=_PYTHON,
    ),
    Source(
        name="torch_export", module="torch_export",
        label="a torch.export program", syntax="PATH.pt2", example="./net.pt2",
        native="torch", runs=_RUNS_TORCH, cannot=_CANNOT_TORCH,
    ),
    Source(
        name="onnx_file", module="onnx_file",
        label="an ONNX file", syntax="PATH.onnx", example="./net.onnx",
        native="onnxruntime",
        runs=(("onnxruntime", "the file as it is"), ("openvino", "the file as it is")),
        cannot=(
            ("torch", "an ONNX file runs on the inference runtimes only"),
            ("tensorflow", "an ONNX file runs on the inference runtimes only"),
        ),
    ),
    Source(
        name="timm", module="timm_arch",
        label="a timm architecture", syntax="timm:NAME", example="timm:convnext_tiny",
        native="torch", runs=_RUNS_TORCH, cannot=_CANNOT_TORCH, libraries=("timm",),
    ),
    Source(
        name="hf", module="hf",
        label="a transformers architecture", syntax="hf:ARCH[@SIZE] or hf:DIR",
        example="hf:llama",
        native="torch",
        libraries=("transformers",),
        # Keras' backends where keras-hub reads the architecture (hf.can_run says which).
        runs=(
            *_RUNS_TORCH,
            ("tensorflow", _KERAS_HUB),
            ("keras-jax", _KERAS_HUB),
            ("keras-torch", _KERAS_HUB),
            # Where fwbench writes the architecture in Flax (hf.can_run says which).
            ("flax", "Flax NNX's Llama-type decoder, from the same safetensors weights"),
        ),
    ),
    Source(
        name="keras", module="keras_model",
        label="a Keras 3 model", syntax="PATH.keras, keras:module:function",
        example="./net.keras",
        native="tensorflow",
        runs=(
            ("tensorflow", "natively: Keras 3 on TensorFlow"),
            ("keras-jax", "natively: Keras 3 on JAX"),
            ("keras-torch", "natively: Keras 3 on PyTorch"),
            ("onnxruntime", _KERAS_EXPORTED),
            ("openvino", _KERAS_EXPORTED),
            ("litert", "exported as a SavedModel and converted by TensorFlow's converter "
                       "(builtin ops), as LiteRT runs the zoo's Keras models"),
        ),
        cannot=(
            ("torch", "a Keras model runs on Keras 3's backends (keras-torch is Keras on "
                      "PyTorch) and the runtimes it exports to"),
        ),
        executes=_PYTHON, executes_when="keras:",
    ),
    Source(
        name="twins", module="twins",
        label="twins from a Python file", syntax="path/file.py:NAME", example="nets.py:mlp",
        native="",
        runs=(),  # whichever frameworks its builders cover (ModelSpec.builder says)
        executes=_PYTHON,
    ),
    # Any folder (after hf:DIR): one that is not a SavedModel is told so.
    Source(
        name="saved_model", module="saved_model",
        label="a TensorFlow SavedModel", syntax="PATH/ (a SavedModel folder)",
        example="./exported_model/",
        native="tensorflow",
        runs=(
            ("tensorflow", "its serving signature, inside a tf.function (graph, xla)"),
            ("openvino", "the folder as it is (openvino.convert_model reads SavedModels)"),
            ("litert", "converted as it is by TensorFlow's converter "
                       "(tf.lite.TFLiteConverter.from_saved_model, builtin ops)"),
        ),
        cannot=(
            ("torch", "a SavedModel is a TensorFlow graph; PyTorch cannot read it"),
            ("keras-jax", _NOT_KERAS),
            ("keras-torch", _NOT_KERAS),
            ("onnxruntime", "ONNX Runtime reads ONNX only, and converting a SavedModel needs "
                            "tf2onnx, which fwbench does not use: convert it yourself (python "
                            "-m tf2onnx.convert --saved-model DIR --output net.onnx) and pass "
                            "the .onnx file"),
        ),
        refuses=(
            (TRAIN.name, "a SavedModel's signature is a traced inference graph, with no "
                         "training step to run; pass the model it came from (a .keras "
                         "file) to train it"),
        ),
        mode_limits=(
            ("tensorflow", ("eager",),
             "a SavedModel's signature is a graph: TensorFlow runs it as one in any mode, "
             "so eager would time graph execution under another name; use graph or xla"),
        ),
        executes=(
            "its serving signature, a TensorFlow program: its graph may hold any TensorFlow "
            "operation, file writes included (tf.io.write_file), and runs as TensorFlow "
            "runs it"
        ),
    ),
)  # fmt: skip

_SOURCES: dict[str, Source] = {}
_loaded = False


def register_source(source: Source) -> Source:
    """Add a plugin's source (its `module` a dotted path); the built-ins are the table
    above, asked first."""
    _SOURCES[source.name] = source
    return source


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        # The built-ins first, in their order; what a plugin registered follows them.
        early = dict(_SOURCES)
        _SOURCES.clear()
        _SOURCES.update((source.name, source) for source in _BUILT_IN)
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


def _resolve(text: str, zoo: Sequence[str]) -> ModelSpec:
    source = source_of(text)
    if source is None:
        raise SpecError(
            f"unknown model {text!r}; valid choices: {', '.join(zoo)}, or a model of your "
            f"own: {syntaxes()}"
        )
    return source.resolve(text)


models.set_resolver(_resolve)
