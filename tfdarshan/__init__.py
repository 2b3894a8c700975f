"""tfdarshan: Darshan-compatible I/O profiling for TensorFlow."""
