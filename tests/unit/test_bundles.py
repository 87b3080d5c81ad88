"""Option bundles: a dataclass's fields become a command's options, the command receives
one instance, and every command that builds cases takes the same workload flags."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Annotated

import pytest
import typer
from typer.main import get_command
from typer.testing import CliRunner

from fwbench.cli.bundles import take, takes
from fwbench.cli.workload import Timing, Workload

AlphaOption = Annotated[int, typer.Option(help="An alpha.")]
BetaOption = Annotated[str, typer.Option(help="A beta.")]
GammaOption = Annotated[list[int] | None, typer.Option(help="Gammas.")]


@dataclass(frozen=True)
class Toy:
    alpha: AlphaOption = 1
    beta: BetaOption = "b"
    gamma: GammaOption = None


def _app(**bundles: object) -> tuple[typer.Typer, list[object]]:
    seen: list[object] = []
    app = typer.Typer()

    @app.command()
    @takes(**bundles)  # type: ignore[arg-type]
    def command(
        name: Annotated[str, typer.Option()],
        toy: Toy = Toy(),
        last: Annotated[int, typer.Option()] = 0,
    ) -> None:
        seen.append((name, toy, last))

    return app, seen


def test_a_bundles_fields_are_the_commands_options_and_arrive_as_one_value() -> None:
    app, seen = _app(toy=Toy)
    given = ["--name", "n", "--alpha", "3", "--gamma", "4", "--gamma", "5", "--last", "9"]
    result = CliRunner().invoke(app, given)
    assert result.exit_code == 0, result.output
    assert seen == [("n", Toy(alpha=3, beta="b", gamma=[4, 5]), 9)]
    help_text = CliRunner().invoke(app, ["--help"]).output
    assert "An alpha." in help_text and "--beta" in help_text


def test_a_command_leaves_fields_out_or_declares_them_otherwise() -> None:
    other = (Annotated[int, typer.Option(help="Another alpha.")], 7)
    app, seen = _app(toy=take(Toy, omit=("gamma",), replace={"alpha": other}))
    assert CliRunner().invoke(app, ["--name", "n"]).exit_code == 0
    assert seen == [("n", Toy(alpha=7), 0)]
    result = CliRunner().invoke(app, ["--name", "n", "--gamma", "1"])
    assert result.exit_code == 2 and "No such option: --gamma" in result.output
    assert "Another alpha." in CliRunner().invoke(app, ["--help"]).output


@pytest.mark.parametrize(
    ("bundles", "says"),
    [
        ({"toy": take(Toy, omit=("delta",))}, "Toy has no field ['delta']"),
        ({"other": Toy}, "command has no parameter ['other']"),
        ({"toy": take(Toy, replace={"alpha": (int, 0)}), "last": Toy}, "options given twice"),
    ],
)
def test_a_wrong_bundle_is_a_programming_error_at_import(
    bundles: dict[str, object], says: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(says)):
        _app(**bundles)


def _options(command: str) -> set[str]:
    from fwbench.cli.app import app

    group = get_command(app)
    return {p.name for p in group.commands[command].params}  # type: ignore[attr-defined]


# What each command leaves out of the workload, on purpose (its module says why).
LEFT_OUT = {
    "run": set(),
    "explain": set(),
    "tune": {"input_shape", "objective", "layout", "autotune"},
    "serve": {"objective", "layout", "autotune"},
}


@pytest.mark.parametrize("command", sorted(LEFT_OUT))
def test_every_command_that_builds_cases_takes_the_whole_workload(command: str) -> None:
    """A workload flag added to `Workload` reaches every such command: none copies the
    flags by hand (tune declares its searched axes and serve its batch list itself)."""
    fields = {f.name for f in dataclasses.fields(Workload)}
    assert fields - LEFT_OUT[command] <= _options(command)


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_run_and_sweep_take_the_same_timing_flags(command: str) -> None:
    assert {f.name for f in dataclasses.fields(Timing)} <= _options(command)
