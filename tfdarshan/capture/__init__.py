"""Capture: the binding to the C shim (`_native`, the only module that
touches cffi), the process-wide recorder, Snapshot values with Darshan's
counters, what gets recorded (config), mounts, heatmap bins, coverage, and
which rank of a job this process is.

May import: tfdarshan.errors and nothing else of tfdarshan. Everything
above it (tf, logs, advice, cli, the tab) reads captured data from here."""
