"""Data-parallel training benchmarks: the rank process and its workloads.

`worker` is the rank process; `torch_dp` and `tf_dp` import a framework and are loaded
only inside a rank. The strategies' table is `fwbench.catalog.strategies`; the launcher
side, which starts a case's ranks and answers the driver as one worker, is
`fwbench.launch.rank_group`. See docs/distributed.md.
"""
