"""Reading exported JSON back: records of any schema version, validated into Results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fwbench.case import validation_message
from fwbench.errors import StoreError
from fwbench.result import Result


def read_records(path: Path) -> list[Result]:
    """Every record in a JSON export (`fwbench export`, `run --json`, `results --json`).

    All or nothing: the first record that does not validate stops the read, naming it.
    """
    try:
        data: Any = json.loads(path.read_bytes())
    except OSError as exc:
        raise StoreError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: not a JSON export: {exc}") from None
    records = [data] if isinstance(data, dict) else data
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise StoreError(f"{path}: not a JSON export: expected a list of result records")
    results = []
    for i, record in enumerate(records, 1):
        try:
            results.append(Result.from_record(record))
        except ValidationError as exc:
            raise StoreError(f"{path}: record {i}: {validation_message(exc)}") from None
        except (ValueError, TypeError, KeyError) as exc:
            raise StoreError(f"{path}: record {i}: {exc}") from None
    return results
