"""The launcher: the driver, its workers and the executors that run them.

The launcher's defaults live here, apart from its modules, so that the CLI shows them in
its help without importing the driver.
"""

# Seconds a run (a worker process) may take before it is stopped.
DEFAULT_TIMEOUT_S = 900.0

# Workloads that take turns in a sweep unless --spread says otherwise. One at a time
# already meets the coverage target in sweeps (85% of pairs; 4 taking turns: 92%,
# docs/decisions.md) and stores each workload as soon as it is done.
DEFAULT_SPREAD = 1
