"""The results store: an embedded DuckDB file with a versioned schema (`db.ResultStore`).

The default file and the export formats live here, apart from the store's modules, so
that the CLI shows them in its help without importing them.
"""

from pathlib import Path

DEFAULT_DB = Path("fwbench-results/results.duckdb")

# What `fwbench export` writes (fwbench.store.export).
EXPORT_FORMATS: tuple[str, ...] = ("csv", "parquet", "json")
