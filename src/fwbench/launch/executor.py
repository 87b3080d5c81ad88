"""What an executor is: something that runs groups of requests (cases, or serving points)
and hands back outcomes.

Two exist: `local.LocalExecutor` (this machine, one group after another) and
`ray.RayExecutor` (a Ray cluster, many nodes at once). Both run a group through
`local.run_group` on the machine that measures it, so isolation, time-outs and crash
classification are the same wherever a case runs; they differ only in where and when.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fwbench.case import Case
from fwbench.launch.protocol import GroupRequest

if TYPE_CHECKING:
    from fwbench.launch.outcome import Outcome

OnStart = Callable[[Case], None]
OnStatus = Callable[[str], None]


@dataclass(frozen=True)
class GroupDone:
    """One group's outcomes, in request order, or why the group was lost."""

    index: int  # the group's position in the list given to `run`
    outcomes: list[Outcome] = field(default_factory=list)
    # The environment of the host that measured the group; None: the driver's own.
    host: dict[str, Any] | None = None
    # Set when the executor could not get an outcome at all (a Ray node lost more often
    # than the retries allow): nothing was measured, so nothing is recorded.
    lost: str | None = None
    # False: the outcomes so far of a group that goes on (its cases stopped by
    # "unfinished"), handed back so that a command killed mid-group keeps its runs; the
    # group's final GroupDone replaces them.
    final: bool = True


class Executor(Protocol):
    def connect(self) -> AbstractContextManager[None]:
        """Get ready to run (start or join a cluster); fails fast on a bad address."""
        ...

    def check(self, groups: Sequence[Sequence[GroupRequest]]) -> None:
        """Refuse, before any work, groups this executor can never run (inside
        `connect()`); a no-op where every group can run."""
        ...

    def run(
        self,
        groups: Sequence[Sequence[GroupRequest]],
        timeout_s: float,
        on_start: OnStart | None = None,
        on_status: OnStatus | None = None,
    ) -> Iterator[GroupDone]:
        """Run every group (inside `connect()`); yield each as soon as it is done, and
        optionally its outcomes so far before that (`final` False).

        `timeout_s` applies to each case, from the moment its group starts to run.
        """
        ...
