"""TensorFlow: profiling sessions (one interface, `session`), the drivers
that open and close them (`profiler_hooks` for tf.profiler and Trace,
`keras` for Keras batches, `runner` for `tfdarshan run`), step series, and
I/O lines in XProf's XPlane. `hooks` installs the drivers.

May import: tfdarshan.capture, tfdarshan.logs, tfdarshan.errors."""
