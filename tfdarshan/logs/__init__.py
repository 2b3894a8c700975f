"""Logs on disk: genuine Darshan logs (written through libdarshan-util,
read back with PyDarshan or our decoder), profiling sessions in a
TensorBoard log directory, and a multi-rank job's shared directory and
Darshan job log.

May import: tfdarshan.capture, tfdarshan.errors."""
