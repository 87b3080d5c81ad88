"""Data-parallel training benchmarks: strategies, their workloads and their launcher.

`strategies` is pure (imported by `Case` for validation); `rank_group` runs a case's
ranks from the launcher side; `worker` is the rank process; `torch_dp` and `tf_dp` import
a framework and are loaded only inside a rank. See docs/distributed.md.
"""
