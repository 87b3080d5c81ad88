"""A dimension added in one module (tests/plugins/fwbench_toy_dimension.py: `length`, and
the model `toy_signal` whose inputs are written in terms of it) is a dimension like the
built-in ones, through the registry alone: a case's dims, its key and shape, `--dim` on
the CLI, a sweep axis, the store's dims and the same refusals. No file of fwbench names
it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fwbench.case import Case
from fwbench.errors import SpecError
from fwbench.store.db import ResultStore
from tests.conftest import FAST_TIMING_YAML, fwbench


def test_a_plugins_dimension_sizes_cases_and_is_refused_where_it_does_not_apply(
    toy_dimension_env: dict[str, str],
) -> None:
    short, long = (
        Case.build(framework="torch", model="toy_signal", batch_size=2, length=n) for n in (16, 64)
    )
    assert short.dims == {"length": 16} and short.inputs == "x=Bx16x2:float32"
    assert short.shape == "len16" and short.key() != long.key()
    # Left out, it takes the model's default; given as a mapping, the same case.
    default = Case.build(framework="torch", model="toy_signal", batch_size=2)
    assert default.dims == {"length": 32}
    assert (
        Case.build(framework="torch", model="toy_signal", batch_size=2, dims={"length": 16})
        == short
    )
    for fields, says in (
        ({"length": 2}, "length: 2 is out of range (valid: 3 to 65536)"),
        ({"model": "resnet18", "length": 8}, "length: does not apply to resnet18"),
        ({"dims": {"lenght": 8}}, "dims: no dimension 'lenght' is declared; valid choices: "),
        ({"inputs": "x=Bx9x2:float32"}, "inputs: toy_signal's inputs are made from its dim"),
    ):
        with pytest.raises(SpecError) as err:
            Case.build(**{"framework": "torch", "model": "toy_signal", **fields})
        assert str(err.value).startswith(says), err.value


def test_a_plugins_dimension_is_a_flag_and_a_sweep_axis_and_is_stored(
    tmp_path: Path, toy_dimension_env: dict[str, str]
) -> None:
    env = toy_dimension_env
    db = tmp_path / "r.duckdb"
    proc = fwbench(
        "run", "--framework", "torch", "--model", "toy_signal", "--task", "infer",
        "--batch-size", "2", "--threads", "1", "--dim", "length=48", "--max-time", "0.3",
        "--min-runs", "1", "--max-runs", "1", "--db", str(db), "--json", env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    record = json.loads(proc.stdout)
    assert record["status"] == "ok", record["error"]
    assert record["dims"] == {"length": 48} and record["inputs"] == "x=Bx48x2:float32"
    bad = fwbench(
        "run", "--framework", "torch", "--model", "toy_signal", "--dim", "length", env=env
    )
    assert bad.returncode == 2 and "dim: 'length' is not NAME=VALUE" in bad.stderr

    spec = tmp_path / "s.yaml"
    spec.write_text(
        "framework: [torch, tensorflow]\nmodel: toy_signal\ntask: infer\nbatch_size: 2\n"
        "length: [16, 40]\nthreads: 1\n" + FAST_TIMING_YAML
    )
    proc = fwbench("sweep", str(spec), "--db", str(db), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(proc.stdout)
    assert sorted((r["framework"], r["dims"]["length"]) for r in records) == [
        ("tensorflow", 16), ("tensorflow", 40), ("torch", 16), ("torch", 40),
    ]  # fmt: skip
    assert all(r["status"] == "ok" for r in records), [r["error"] for r in records]
    with ResultStore(db, read_only=True) as store:
        stored = {r.case.key(): r.case for r in store.results()}
    assert {c.dims["length"] for c in stored.values()} == {16, 40, 48}
    assert all(c.shape.startswith("len") for c in stored.values())
