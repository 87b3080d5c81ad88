"""A PyTorch program exported by `torch.export` and saved (`torch.export.save`, a
`PATH.pt2` file): its module runs on PyTorch in every mode, and exported again to ONNX
for the runtimes.

Its inputs are the program's: the shapes of its example inputs, a dimension the export
made dynamic (`dynamic_shapes`) left to be given, the leading one by the batch size; a
dimension it fixed stays fixed (an export with a static batch takes that batch only)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fwbench.catalog.inputs import BATCH, TensorSpec, format_signature
from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError, one_line
from fwbench.models.sources.common import digest, existing, file_model, read_model


def claims(text: str) -> bool:
    return text.lower().endswith(".pt2")


# torch's own switch: every torch.load in the process takes weights_only=True, whatever its
# caller asked (torch.export.load asks for an unrestricted unpickling of pickled weights
# and constants, and falls back to one when a safe load of its sample inputs fails).
FORCE_SAFE_LOAD = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
# What torch.export.load would run besides tensors: native code compiled by AOTInductor,
# and constants it unpickles with plain pickle (opaque objects) or TorchScript's unpickler
# (custom classes). The names are torch's (torch.export.pt2_archive.constants).
COMPILED_DIR = "data/aotinductor/"
CONSTANTS_CONFIG = "data/constants/{}_constants_config.json"
PROGRAMS_DIR = "models/"  # each program's graph, its sizes and their ranges, as JSON
UNPICKLED_CONSTANTS = ("custom_obj_", "opaque_obj_")
REFUSED = "fwbench reads a .pt2 as data: its graph and its tensors, never code or pickled objects"


def _program(path: str) -> Any:
    """The saved program, read so that nothing in the file can run: its bytes are read
    once (what is checked is what is loaded), an archive that holds compiled code or
    objects beyond tensors is refused, and every pickle in it is unpickled as
    `weights_only=True` allows (tensors, containers, plain types)."""
    import pickle

    import torch

    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise SpecError(f"model: {path}: cannot be read ({exc.strerror or exc})") from None
    _refuse_code(path, data)

    def load(_: str) -> Any:
        seen = _Kept()
        logger = logging.getLogger("torch.export")
        logger.addHandler(seen)
        try:
            with _safe_loads():
                return torch.export.load(io.BytesIO(data))
        except RuntimeError as exc:
            # torch logs why the archive did not read, then raises "check the warnings
            # above", which nobody saw: the logged error is the message.
            if "warnings above" in str(exc) and seen.errors:
                raise SpecError(
                    f"model: {path}: not a saved torch.export program ({one_line(seen.errors[0])})"
                ) from None
            raise
        except pickle.UnpicklingError as exc:
            # torch's message goes on to say how to load it unsafely: not ours to suggest.
            found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(exc))
            what = f" ({found[1]})" if found else ""
            raise SpecError(
                f"model: {path}: refused: it holds a pickle of more than tensors{what}; {REFUSED}"
            ) from None
        finally:
            logger.removeHandler(seen)

    return read_model(path, "a saved torch.export program", load)


class _Kept(logging.Handler):
    """The exceptions torch logged while it loaded (it logs, then raises a message that
    refers to them)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.errors: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.errors.append(record.exc_info[1])


def _refuse_code(path: str, data: bytes) -> None:
    """A one-line refusal where torch.export.load would run what the file holds. The
    archive is read with the reader torch.export.load reads it with (torch's own, not
    Python's zipfile: the two can pick different copies of an entry named twice), and
    an archive with an entry named twice, or that Python's zipfile cannot list, is
    refused: what is checked must be what is loaded."""
    import torch

    try:
        names = zipfile.ZipFile(io.BytesIO(data)).namelist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise SpecError(
            f"model: {path}: not a saved torch.export program (not the zip archive "
            f"torch.export.save writes: {one_line(exc)})"
        ) from None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SpecError(
            f"model: {path}: refused: entry {twice[0]} is in the archive twice; {REFUSED}"
        )
    try:
        reader = torch._C.PyTorchFileReader(io.BytesIO(data))
        records = list(reader.get_all_records())
    except RuntimeError:
        return  # torch.export.load cannot open it either, and says so in its words
    if any(name.startswith(COMPILED_DIR) for name in records):
        raise SpecError(
            f"model: {path}: refused: it holds a program compiled by AOTInductor (native "
            f"code); {REFUSED}. Save the program with torch.export.save"
        )
    for name in records:
        if name.startswith(PROGRAMS_DIR) and name.endswith(".json"):
            _refuse_graph_code(path, name, bytes(reader.get_record(name)))
        model = _model_of_config(name)
        if model is None:
            continue
        try:
            config = json.loads(bytes(reader.get_record(name))).get("config", {})
            paths = [str(entry.get("path_name", "")) for entry in config.values()]
        except (ValueError, AttributeError, KeyError, RuntimeError):
            raise SpecError(
                f"model: {path}: refused: the constants of program {model!r} cannot be read "
                f"as the list torch.export.save writes; {REFUSED}"
            ) from None
        unpickled = [p for p in paths if p.startswith(UNPICKLED_CONSTANTS)]
        if unpickled:
            raise SpecError(
                f"model: {path}: refused: constant {unpickled[0]} of program {model!r} is a "
                f"pickled object; {REFUSED}"
            )


def _refuse_graph_code(path: str, name: str, data: bytes) -> None:
    """Refuse a program whose graph would run more than its operators: torch reads each
    symbolic size (`expr_str`) with sympy's `sympify`, which evaluates Python, and resolves
    each node's target by name from `torch`, `operator` and `math`, so an edited archive
    could call any function reachable from them. A size must be sympy's own printed form
    of an expression (`srepr`: constructors over numbers and symbol names) and a target an
    operator (torch.ops, less those that read or write files), an arithmetic operator, a
    math function or a symbolic-size function, as torch.export writes them."""
    try:
        program = json.loads(data)
    except (ValueError, RecursionError):
        return  # not JSON: torch.export.load refuses it in its own words
    for key, value in _walk(program):
        if key == "expr_str" and not (isinstance(value, str) and _printed_expr(value)):
            raise SpecError(
                f"model: {path}: refused: a symbolic size in {name} is not an expression "
                f"torch.export writes ({repr(value)[:80]}); {REFUSED}"
            )
        # A node's target, and an operator passed as an argument (a higher-order op's),
        # are resolved by the same name walk.
        if key in ("target", "as_operator") and isinstance(value, str) and not _operator(value):
            raise SpecError(
                f"model: {path}: refused: its graph calls {value[:80]!r}, not an operator; "
                f"{REFUSED}"
            )


def _walk(tree: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of a JSON tree's objects, depth first, without recursion (an
    archive's nesting is the file's to choose)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                yield key, value
                stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)


# What torch.export's printed sizes call (sympy's classes and torch's sympy functions,
# all capitalised) and what a bare name may be; strings are symbol names or numbers.
_CONSTRUCTOR = re.compile(r"[A-Z][A-Za-z0-9_]*")  # OpaqueUnaryFn_sqrt, torch's too
_BARE = frozenset({"true", "false", "oo", "zoo", "nan", "pi", "E", "I"})
_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9_]*|[-+]?[0-9][0-9.eE+-]*")


def _printed_expr(text: str) -> bool:
    """Whether `text` is an expression as sympy prints one (`srepr`): calls of capitalised
    constructors on numbers, symbol names and such calls, with constant keywords. Nothing
    else parses (no attribute, subscript, lambda or lower-case call), and `S`, whose call
    evaluates a string, is not a constructor here."""
    import ast

    if len(text) > 100_000:
        return False
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    stack: list[ast.AST] = [tree.body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Call):
            func = node.func
            if not (
                isinstance(func, ast.Name) and _CONSTRUCTOR.fullmatch(func.id) and func.id != "S"
            ):
                return False
            if any(k.arg is None or not isinstance(k.value, ast.Constant) for k in node.keywords):
                return False
            stack.extend(k.value for k in node.keywords)
            stack.extend(node.args)
        elif isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, str) and not _TEXT.fullmatch(value):
                return False
            if not isinstance(value, str | int | float | bool):
                return False
        elif isinstance(node, ast.Name):
            if node.id not in _BARE:
                return False
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            stack.append(node.operand)
        else:
            return False
    return True


# Operators whose work is a file's, not a tensor's.
_FILE_OPS = re.compile(r"torch\.ops\.(aten\.from_file|debugprims)\b")
_TARGET = re.compile(
    r"torch\.ops\.\w+\.\w+(\.\w+)?"
    r"|_operator\.(add|sub|mul|truediv|floordiv|mod|pow|neg|pos|abs|eq|ne|lt|le|gt|ge"
    r"|and_|or_|xor|not_|invert|lshift|rshift|getitem|index|truth)"
    r"|math\.[a-z][a-z0-9]*"
    r"|torch\._?sym_[a-z_]+"
)


def _operator(target: str) -> bool:
    return bool(_TARGET.fullmatch(target)) and not _FILE_OPS.match(target)


def _model_of_config(name: str) -> str | None:
    prefix, suffix = CONSTANTS_CONFIG.split("{}")
    if name.startswith(prefix) and name.endswith(suffix) and len(name) > len(prefix + suffix):
        return name[len(prefix) : -len(suffix)]
    return None


@contextmanager
def _safe_loads() -> Iterator[None]:
    before = os.environ.get(FORCE_SAFE_LOAD)
    os.environ[FORCE_SAFE_LOAD] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(FORCE_SAFE_LOAD, None)
        else:
            os.environ[FORCE_SAFE_LOAD] = before


def build(path: str) -> Any:
    """The program's module, in a module whose train() and eval() change nothing: an
    exported graph fixed dropout's and normalisation's behaviour when it was exported (its
    module refuses both calls), and PyTorch's adapter makes them for every model."""
    import torch

    class Exported(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(*args)

        def train(self, mode: bool = True) -> Exported:
            self.training = mode
            return self

    return Exported(_program(path).module())


def resolve(text: str) -> ModelSpec:
    path = existing(text, "a torch.export program")
    content = digest(path)
    return file_model(
        str(path), content, path.name,
        family="torch.export",
        builders={"torch": lambda **_: build(str(path))},
        description=f"torch.export program {path}",
    )  # fmt: skip


def describe(spec: ModelSpec) -> dict[str, Any]:
    import torch

    from fwbench.models.sources.torch_common import dtype_name

    program = _program(spec.reference)
    user = set(program.graph_signature.user_inputs)
    inputs = []
    for node in program.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        value = node.meta.get("val")
        if not isinstance(value, torch.Tensor):
            raise SpecError(f"model: {spec.reference}: input {node.name} is not a tensor")
        dims: tuple[int | str | None, ...] = tuple(
            d if isinstance(d, int) else None for d in value.shape
        )
        if dims and dims[0] is None:
            dims = (BATCH, *dims[1:])  # a dynamic leading dimension: the batch
        inputs.append(TensorSpec(node.name, dims, dtype_name(value.dtype)))
    params = sum(
        int(program.state_dict[name].numel())
        for name in program.graph_signature.parameters
        if name in program.state_dict
    )
    return {"inputs": format_signature(inputs), "params": params, "outputs": ""}
