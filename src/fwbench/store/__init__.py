"""The results store: an embedded DuckDB file with a versioned schema."""

from fwbench.store.db import DEFAULT_DB, ResultStore

__all__ = ["DEFAULT_DB", "ResultStore"]
