"""What each instruction of a compiled XLA program computes, from the program's text
(`jax.jit(f).lower(...).compile().as_text()`). Pure; no framework needed.

A JAX profile names the ops it ran by their HLO instruction (`convolution.3`,
`ynn_fusion.2`, `multiply_add_fusion`): a fusion's name says little of what it holds.
The program's text says it: the opcodes of the computation a fusion calls, and, through
each instruction's stack frame, the Python functions that made it (`Conv.__call__`,
`BatchNorm.__call__`, `Optimizer.update`). `fwbench explain` categorises a JAX op by
both, as it categorises a PyTorch op by its ancestors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

_MODULE = re.compile(r"^HloModule ([\w.\-]+)")
_HEADER = re.compile(r"^(?:ENTRY )?%([\w.\-]+) \(.*\) -> .*\{$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = (.*)$")
# The opcode follows the result's type: the first `word(` whose operands start with an
# instruction (%), a literal, or nothing. Types hold no such pattern.
_OPCODE = re.compile(r"\s([a-z][\w\-]*)\((?:%|\)|[\w\-])")
_CALLS = re.compile(r"\bcalls=%([\w.\-]+)")
_FRAME = re.compile(r"\bstack_frame_id=(\d+)")
_WINDOW = re.compile(r"\bwindow=\{size=([\dx]+)")
_ROW = re.compile(r"^(\d+) (.*)$")
_FIELD = re.compile(r"(\w+)=(\d+)")
# Opcodes that compute nothing themselves: left out of what a fusion is said to hold.
_PLUMBING = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast"}


def _sections(text: str) -> dict[str, list[str]]:
    """The tables before the computations (FileNames, FunctionNames, FileLocations,
    StackFrames), each as its rows."""
    found: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = found.setdefault(line, [])
        elif current is not None and _ROW.match(line):
            current.append(line)
        else:
            current = None
    return found


def _table(rows: list[str]) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for row in rows if (m := _ROW.match(row))}


def _from_library(path: str, libraries: frozenset[str]) -> bool:
    return not libraries.isdisjoint(path.replace("\\", "/").split("/")[:-1])


def _functions(text: str, libraries: frozenset[str]) -> dict[int, list[str]]:
    """Each stack frame's functions that say what its ops compute, outermost first: those
    of `libraries` (packages, by a folder of their file's path), and the frame's own."""
    sections = _sections(text)
    files = {k: v.strip('"') for k, v in _table(sections.get("FileNames", [])).items()}
    names = {k: v.strip('"') for k, v in _table(sections.get("FunctionNames", [])).items()}
    locations = {
        k: dict((f, int(n)) for f, n in _FIELD.findall(v))
        for k, v in _table(sections.get("FileLocations", [])).items()
    }
    frames = {
        k: dict((f, int(n)) for f, n in _FIELD.findall(v))
        for k, v in _table(sections.get("StackFrames", [])).items()
    }
    # XLA prints each parent one more than its row (a root's is 1, its own row when it
    # is the first); a printer writing rows, with 0 for none, shows some parent as 0.
    shift = 0 if any(f.get("parent_frame_id", 0) == 0 for f in frames.values()) else 1
    chains: dict[int, list[str]] = {}
    for frame in frames:
        chain: list[str] = []
        seen: set[int] = set()
        at = frame
        while at in frames and at not in seen:
            seen.add(at)
            location = locations.get(frames[at].get("file_location_id", 0), {})
            name = names.get(location.get("function_name_id", 0))
            path = files.get(location.get("file_name_id", 0), "")
            if name and (at == frame or _from_library(path, libraries)):
                chain.append(name)
            at = frames[at].get("parent_frame_id", 0) - shift
        chains[frame] = chain[::-1]
    return chains


def _instructions(text: str) -> Iterator[tuple[str, str, str]]:
    """(computation, instruction, the rest of its line) for every instruction."""
    computation = ""
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            computation = header.group(1)
            continue
        found = _INSTRUCTION.match(line)
        if found and computation:
            yield computation, found.group(1), found.group(2)


def module_name(text: str) -> str:
    """The program's name (`jit_step`, from the function jitted), as a profile's
    `hlo_module` names the program an op ran in."""
    found = _MODULE.match(text)
    return found.group(1) if found else ""


def op_texts(text: str, libraries: Iterable[str] = ()) -> dict[str, str]:
    """Each instruction of the program by name, as the categoriser reads it:
    "functions | name | opcodes" (the Python functions that made it, outermost first;
    its opcode, and a fusion's the opcodes of the computation it calls).

    Of the functions, those of `libraries` (the framework's packages, whose functions
    name what they compute: `Conv.__call__`, BatchNorm's statistics, an optimizer's
    update) through the whole stack, and the instruction's own. The others between (the
    user's model, fwbench's step, the worker) say how the program is arranged, not what
    an op computes, and are left out: PyTorch's profile likewise gives an op its operator
    ancestors, never the modules that called it."""
    chains = _functions(text, frozenset(libraries))
    opcodes: dict[str, list[str]] = {}
    lines: dict[str, tuple[str, str | None]] = {}
    for computation, name, rest in _instructions(text):
        opcode = _opcode(rest)
        if opcode is not None:
            opcodes.setdefault(computation, []).append(opcode)
        lines[name] = rest, opcode
    out = {}
    for name, (rest, opcode) in lines.items():
        kinds = [opcode] if opcode else []
        called = _CALLS.search(rest)
        if called:
            kinds += opcodes.get(called.group(1), [])
        kinds = [k for k in dict.fromkeys(kinds) if k not in _PLUMBING]
        frame = _FRAME.search(rest)
        functions = chains.get(int(frame.group(1)), []) if frame else []
        callers = "/".join(dict.fromkeys(functions))  # a function's lines are one caller
        out[name] = f"{callers} | {name} | {' '.join(kinds)}"
    return out


def _opcode(rest: str) -> str | None:
    """An instruction's opcode; a `reduce-window` whose window spans one dimension is
    called what it computes, a `reduce`: XLA's own rewrite of a long reduction into
    chunks (a norm's mean over its features), no pooling, which windows two or more."""
    found = _OPCODE.search(rest)
    if found is None:
        return None
    window = _WINDOW.search(rest) if found.group(1) == "reduce-window" else None
    if window is not None and sum(int(n) > 1 for n in window.group(1).split("x")) <= 1:
        return "reduce"
    return found.group(1)
