"""`train`: one optimizer step (forward, loss, backward, update) on one batch."""

from fwbench.tasks import Task, register_task

TRAIN = register_task(
    Task(
        name="train",
        label="training",
        description="one optimizer step: forward, loss, backward and the weight update",
        trains=True,
    )
)
