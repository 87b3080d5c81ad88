"""What a serving scenario is, as a record holds it: below the record (fwbench.result),
above the case.

- `spec`: what a scenario asks for (SingleStream, Server, Offline), its settings, and a
  serving point's key;
- `record`: what a serving point measured (`Serving`, the record's `serving` part), its
  LoadGen runs and tests.

The driver that measures a point is fwbench.serve (the worker side) and
fwbench.launch.serving (the launcher side). See docs/serving.md.
"""
