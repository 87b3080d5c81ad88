"""Serving scenarios' worker side: `loadgen` builds the model, runs MLPerf LoadGen against
it and reads LoadGen's log (imports `mlperf_loadgen` and the framework; workers only).

What a scenario asks for and what its record holds are fwbench.scenario; the launcher
side, which runs each point in several worker processes (runs), frameworks alternating,
and builds the record (a Result with its `serving` part), is fwbench.launch.serving.
See docs/serving.md.
"""
