"""A toy task added in one module, as docs/adding-a-task.md describes.

`probe` runs the first layer of a model only: a step that is neither training nor
inference, so a framework that has not declared it must refuse it rather than measure
it as one of those. Its own dimension, `depth`, is how many times a step applies the
layer: declared here once, it is a --task-dims NAME=VALUE, a sweep axis and a stored
column without other edits. The toy framework (fwbench_toy_framework) implements it;
loaded through FWBENCH_PLUGINS by tests/frameworks/test_plugin_task.py.
"""

from fwbench.tasks import Dimension, Task, register_task

register_task(
    Task(
        name="probe",
        label="probing",
        description="the model's first layer only (a toy task for tests)",
        dimensions=(
            Dimension("depth", "times a step applies the layer", default=1, maximum=64, short="d"),
        ),
    )
)
