"""Twins: one network written once per framework, in one Python file of the user's
(`path/nets.py:NAME`). NAME is a ModelSpec in that file, as a plugin's model is
(docs/adding-a-model.md): its builders (one per framework), its kind of input and
dimensions, its objective. fwbench runs it like a model of the zoo (the same synthetic
data, loss and checks), without an environment variable or a package; its name carries
the file's content hash.

The file is imported in the command's process too: like a plugin, it imports its
frameworks inside the builders only."""

from __future__ import annotations

import dataclasses
import re

from fwbench.catalog.models import ModelSpec
from fwbench.errors import SpecError
from fwbench.models.sources.common import digest, existing, load_module, named

_FORM = re.compile(r"^(?P<file>.+\.py):(?P<name>[A-Za-z_][A-Za-z0-9_]*)$")


def claims(text: str) -> bool:
    return _FORM.match(text) is not None and not text.startswith(("torch:", "keras:"))


def resolve(text: str) -> ModelSpec:
    found = _FORM.match(text)
    assert found is not None
    path = existing(found["file"], "a Python file of twins")
    content = digest(path)
    try:
        module = load_module(str(path))
    except SpecError:
        raise
    except SystemExit as exc:
        # A file that ends the process when imported would end fwbench without a word.
        raise SpecError(
            f"model: {text}: importing {path.name} called sys.exit({exc.code!r}); a file of "
            "twins defines ModelSpecs, it runs nothing at import"
        ) from None
    except Exception as exc:
        raise SpecError(f"model: {text}: importing {path.name} failed: {exc}") from None
    spec = getattr(module, found["name"], None)
    if not isinstance(spec, ModelSpec):
        have = [n for n, v in vars(module).items() if isinstance(v, ModelSpec)]
        hint = f"; it has: {', '.join(have)}" if have else "; it defines no ModelSpec"
        raise SpecError(
            f"model: {text}: {path.name} has no ModelSpec named {found['name']!r}{hint}"
        )
    return dataclasses.replace(
        spec,
        name=named(spec.name, content),
        workload="",  # its own name: never compared with another file's
        reference=f"{path}:{found['name']}",
        digest=content,
    )
