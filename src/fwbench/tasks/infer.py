"""`infer`: one forward pass on one batch, without gradients."""

from fwbench.tasks import Task, register_task

INFER = register_task(
    Task(
        name="infer",
        label="inference",
        description="one forward pass without gradients (inference mode)",
        serves=True,
    )
)
