"""A toy task added in one module, as docs/adding-a-task.md describes.

`probe` runs the first layer of a model only: a step that is neither training nor
inference, so a framework that has not declared it must refuse it rather than measure
it as one of those. The toy framework (fwbench_toy_framework) implements it; loaded
through FWBENCH_PLUGINS by tests/frameworks/test_plugin_task.py.
"""

from fwbench.tasks import Task, register_task

register_task(
    Task(
        name="probe",
        label="probing",
        description="the model's first layer only (a toy task for tests)",
    )
)
