"""The tables every layer reads: frameworks (`frameworks.py`), models (`models.py`) and
data-parallel strategies (`strategies.py`), with the tasks (`fwbench.tasks`) beneath them.
Data only: nothing here imports a framework, or any fwbench package above it."""
