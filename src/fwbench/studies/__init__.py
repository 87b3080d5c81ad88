"""The published studies fwbench reproduces: their claims as data, evaluated on results."""
