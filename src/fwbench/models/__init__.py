"""The zoo: what each built-in model is (vision, language, speech), each framework's
builders of them (every `*_zoo` module here: a framework's own file registers its table,
so adding a framework edits no file of the zoo), and the model sources, each reading one
kind of model a user has. Importing this package registers them all in the catalog
(fwbench.catalog.models, fwbench.catalog.sources); `import fwbench` does, before any
plugin, so a plugin's model can never take a built-in name unseen.

Nothing here imports a framework at module level: the builders and the sources import
theirs when they are called, in a worker. The framework-specific modules beside them
(torch_gpt, keras_resnet, ...) are imported only by those builders and the adapters."""

from __future__ import annotations

import importlib
import pkgutil

from fwbench.catalog import sources as _sources  # noqa: F401  (the resolver of user models)
from fwbench.models import language, sources, speech, vision  # noqa: F401

# The frameworks' builder tables, found by name: a new framework's file joins them.
for _found in pkgutil.iter_modules(__path__):
    if _found.name.endswith("_zoo"):
        importlib.import_module(f"{__name__}.{_found.name}")
