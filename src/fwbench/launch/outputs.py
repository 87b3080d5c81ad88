"""A user's model's outputs, whole, from the worker that computed them to the check that
compares every framework's (fwbench.models.parity.output_check): each case's first run
writes its outputs into this command's own folder, the driver reads them when the
case's group is checked and removes them once its verdict is final. They are never
stored with a result: a record holds a summary (Workload.output_sample).

The folder is one per command (removed when it exits); a worker on another machine (a
Ray cluster) writes into its own, so the check there falls back to the summary and
says so."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fwbench.case import Case

# Outputs larger than this (all of a case's, as float32) are not written: the check then
# compares their summaries, and says so. A classifier's logits at batch 32 are 128 KiB;
# a segmentation map at 512x512 over 21 classes, batch 8, is 176 MiB.
LIMIT_BYTES = 256 * 2**20

_folder: list[Path] = []


def _command_folder() -> Path:
    if not _folder:
        made = Path(tempfile.mkdtemp(prefix="fwbench-outputs-"))
        atexit.register(shutil.rmtree, made, True)
        _folder.append(made)
    return _folder[0]


def keeps_outputs(case: Case) -> bool:
    """Whether the case's worker keeps its outputs for the check: a user's model (its
    own inputs, the same in every framework) in a step that does not train, one process."""
    from fwbench.tasks import get_task

    return case.inputs is not None and not get_task(case.task).trains and not case.strategy


def path_for(case: Case) -> Path:
    """Where the case's first run writes its outputs in this command."""
    name = hashlib.sha256(case.key().encode()).hexdigest()[:24]
    return _command_folder() / f"{name}.npz"


def write(path: str, arrays: list[Any]) -> bool:
    """In the worker: `arrays` as one .npz at `path` (written whole, then renamed), unless
    they exceed LIMIT_BYTES. Whether they were written."""
    import numpy as np

    made = [np.asarray(a) for a in arrays]
    if sum(a.size for a in made) * 4 > LIMIT_BYTES:
        return False
    partial = f"{path}.{os.getpid()}.partial"
    with open(partial, "wb") as f:
        np.savez(f, *made)
    os.replace(partial, path)
    return True


def read(case: Case) -> list[Any] | None:
    """In the driver: the outputs the case's worker wrote, or None (none written here)."""
    import numpy as np

    if not _folder:  # no case of this command kept its outputs here
        return None
    path = path_for(case)
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as found:
        return [found[f"arr_{i}"] for i in range(len(found.files))]


def discard(case: Case) -> None:
    # A command none of whose cases kept outputs makes no folder to discard them from.
    if _folder:
        path_for(case).unlink(missing_ok=True)
