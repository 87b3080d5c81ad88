"""The bundles of flags several commands take (cli/bundles.py): what is measured (the
workload: task, batch, a model's dimensions and inputs, precision, device, threads) and how
long it is measured (the timing flags `run` and `sweep` lay over their timing)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from fwbench.case import canonical_task_dims, parse_dims
from fwbench.cli.common import cases_per_framework, timing_flags
from fwbench.cli.options import (
    AutotuneOption,
    BandOption,
    BatchSizeOption,
    CompileCacheOption,
    DeviceOption,
    DimOption,
    EstimatorOption,
    FreqBinsOption,
    InputShapeOption,
    InputSizeOption,
    LayoutOption,
    MaxRunsOption,
    MaxTimeOption,
    MinRunsOption,
    NumClassesOption,
    ObjectiveOption,
    PrecisionOption,
    RequireIdleOption,
    SeqLenOption,
    TargetCiOption,
    TaskDimsOption,
    TaskOption,
    ThreadsOption,
    VocabSizeOption,
)
from fwbench.errors import SpecError
from fwbench.tasks import task_dimensions
from fwbench.tasks.train import TRAIN

if TYPE_CHECKING:
    from collections.abc import Sequence

    from fwbench.case import Case
    from fwbench.measure.settings import TimingConfig


@dataclass(frozen=True)
class Workload:
    """What a case measures besides its model and framework: the same flags in every
    command that builds cases from flags (a command may leave some out, or take a field
    as a list to sweep it: cli/bundles.Taken)."""

    task: TaskOption = TRAIN.name
    task_dims: TaskDimsOption = None
    batch_size: BatchSizeOption = None
    input_shape: InputShapeOption = None
    objective: ObjectiveOption = None
    input_size: InputSizeOption = None
    seq_len: SeqLenOption = None
    vocab_size: VocabSizeOption = None
    freq_bins: FreqBinsOption = None
    num_classes: NumClassesOption = None
    dim: DimOption = None
    precision: PrecisionOption = None
    layout: LayoutOption = None
    autotune: AutotuneOption = False
    device: DeviceOption = "cpu"
    threads: ThreadsOption = 0

    @classmethod
    def of(cls, case: Case, **changes: Any) -> Workload:
        """A stored case's workload (explain --case), with `changes` over it."""
        fields = {
            "task": case.task,
            "task_dims": case.task_dims,
            "batch_size": case.batch_size,
            "dim": [f"{name}={value}" for name, value in case.dims.items()] or None,
            "precision": case.precision,
            "layout": case.layout,
            "autotune": bool(case.autotune),
            "device": case.device,
            "threads": case.threads,
        }
        return cls(**(fields | changes))

    def fields(self) -> dict[str, Any]:
        """Its flags as a case's fields: `--dim NAME=VALUE` as the case's dims, beside
        the flags that spell some dimensions (`--input-size`; Case folds them in). A
        task's dimension given as `--dim` (`--dim new_tokens=64`) joins `--task-dims`, as
        a sweep takes either kind as an axis of its name."""
        fields = asdict(self)
        dims = parse_dims(fields.pop("dim") or [])
        of_tasks = task_dimensions()
        moved = {name: dims.pop(name) for name in list(dims) if name in of_tasks}
        if moved:
            given = canonical_task_dims(fields["task_dims"]) or {}
            for name, value in moved.items():
                if name in given and str(given[name]).strip() != str(value):
                    raise SpecError(
                        f"{name}: given twice ({given[name]} by --task-dims, {value} by --dim)"
                    )
            fields["task_dims"] = {**given, **moved}
        fields["dims"] = dims
        return fields

    def cases(
        self,
        model: str,
        frameworks: list[str],
        modes: Sequence[str | None] = (),
        strategies: list[str] | None = None,
        options: list[str] | None = None,
        **changes: Any,
    ) -> list[Case]:
        """One validated case per framework (cli.common.cases_per_framework), the
        workload's fields with `changes` over them (a serve point's batch, a world size)."""
        fields = self.fields() | changes
        input_shape, objective = fields.pop("input_shape"), fields.pop("objective")
        return cases_per_framework(
            frameworks,
            modes,
            strategies,
            options,
            input_shape=input_shape,
            objective=objective,
            model=model,
            **fields,
        )


@dataclass(frozen=True)
class Timing:
    """The timing flags, laid over the command's timing (TimingConfig's defaults for
    `run`, a sweep file's `timing:` for `sweep`); left out, a flag changes nothing."""

    target_ci: TargetCiOption = None
    max_time: MaxTimeOption = None
    min_runs: MinRunsOption = None
    max_runs: MaxRunsOption = None
    estimator: EstimatorOption = None
    band: BandOption = None
    require_idle: RequireIdleOption = None
    compile_cache: CompileCacheOption = None

    def over(self, base: TimingConfig) -> TimingConfig:
        return timing_flags(base, **asdict(self))
