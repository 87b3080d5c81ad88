"""Reading exported JSON back: records of any schema version, validated into Results."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fwbench.case import validation_message
from fwbench.catalog.frameworks import FRAMEWORKS
from fwbench.catalog.models import find_model
from fwbench.errors import FwbenchError, StoreError
from fwbench.result import Result
from fwbench.store import columns
from fwbench.tasks import find_task

PROGRESS_EVERY = 1000


def read_records(
    path: Path,
    warn: Callable[[str], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[Result]:
    """Every record in a JSON export, as `iter_records` reads them."""
    return list(iter_records(path, warn, progress))


class _Twice(ValueError):
    """A JSON object names one key twice."""


def _once_each(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refused where it names a key twice: json keeps the last, so an
    appended `"result_id"` or `"step_time_s"` would replace the one the record was
    checked by when it was written, without a word."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise _Twice(f"key {key!r} is in one object twice")
        found[key] = value
    return found


def iter_records(
    path: Path,
    warn: Callable[[str], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[Result]:
    """Every record in a JSON export (`fwbench export`, `run --json`, `results --json`,
    `serve --json`, a file of results kept when their database was full), each validated
    as a record made here is (Result.from_record, a serving point's too), and checked
    to fit the database's columns. `warn` hears of cases of models no loaded plugin registers;
    `progress` hears (records read, records in the file) every PROGRESS_EVERY records.

    All or nothing: the first record that does not validate stops the read, naming it.
    """
    try:
        raw = path.read_bytes()
        data: Any = json.loads(raw, object_pairs_hook=_once_each)
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: not a JSON export: {exc}") from None
    except _Twice as exc:
        raise StoreError(f"{path}: not a JSON export: {exc}") from None
    except RecursionError:
        raise StoreError(f"{path}: not a JSON export: nested too deeply") from None
    records = [data] if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise StoreError(f"{path}: not a JSON export: expected a list of result records")
    # JSON can hold a NUL only escaped (json refuses raw control characters): a file
    # without the escape need not be walked for one.
    nul_escaped = b"\\u0000" in raw
    del raw
    unknown: set[str] = set()
    for i in range(1, len(records) + 1):
        # Each parsed record is let go once validated: a large export is not held twice.
        record, records[i - 1] = records[i - 1], None
        try:
            result = _read(record, nul_escaped)
        except ValidationError as exc:
            raise StoreError(f"{path}: record {i}: {validation_message(exc)}") from None
        except (ValueError, TypeError, KeyError, FwbenchError) as exc:
            raise StoreError(f"{path}: record {i}: {exc}") from None
        except RecursionError:
            raise StoreError(f"{path}: record {i}: nested too deeply") from None
        if warn is not None:
            for what in _unregistered(result.case):
                if what not in unknown:
                    unknown.add(what)
                    warn(
                        f"{path}: {what} is not registered here (a plugin's?); its cases are "
                        "imported with their fields checked, not the registry's rules"
                    )
        yield result
        if progress is not None and (i % PROGRESS_EVERY == 0 or i == len(records)):
            progress(i, len(records))


def _read(record: dict[str, Any], nul_escaped: bool) -> Result:
    # No benchmark writes a NUL: it is damage, and tools reading the exports as C strings
    # (terminals, CSV readers) cut text at one.
    for where, text in _strings(record) if nul_escaped else ():
        if "\x00" in text:
            raise ValueError(f"{where}: contains a NUL byte")
    result = Result.from_record(record)
    if result.serving is not None:
        # A serving point's (`serve --json`, or kept when its database was full): its
        # row's columns are the scenario's (store.db._serving_row).
        return result
    problem = columns.out_of_range(columns.row(result))
    if problem:
        raise ValueError(problem)
    return result


def _strings(record: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Every string of a record, keys included, with where it is; iterative, so that a
    record as deep as the JSON reader allows is walked without a RecursionError."""
    stack: list[tuple[str, Any]] = [("", record)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            yield where or "record", value
        elif isinstance(value, dict):
            for k, v in value.items():
                inner = f"{where}.{k}" if where else str(k)
                yield inner, str(k)
                stack.append((inner, v))
        elif isinstance(value, list):
            stack.extend((f"{where}[{n}]", v) for n, v in enumerate(value))


def _unregistered(case: Any) -> list[str]:
    """What of a record's case no registry here knows (a plugin not loaded): reading a
    stored result and importing one take it alike, and say so."""
    found = []
    if case.framework not in FRAMEWORKS:
        found.append(f"framework {case.framework!r}")
    if find_task(case.task) is None:
        found.append(f"task {case.task!r}")
    if find_model(case.model) is None and not case.model_path:
        found.append(f"model {case.model!r}")
    return found
