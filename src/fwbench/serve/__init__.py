"""Serving scenarios: latency under load, driven by MLPerf LoadGen, per framework.

- `spec`: what a scenario asks for (SingleStream, Server, Offline) and its settings;
- `loadgen`: the worker side, which builds the model, runs LoadGen against it and
  reads LoadGen's log (imports `mlperf_loadgen` and the framework; workers only);
- the launcher side, which runs each point in several worker processes (runs),
  frameworks alternating, and builds the record, is `fwbench.launch.serving`;
- `result`: that record (`ServingResult`), stored in the results database's `serving`
  table and read by every view.

See docs/serving.md.
"""
