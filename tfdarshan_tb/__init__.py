"""tfdarshan_tb: the TensorBoard "I/O" tab (registered through the
tensorboard_plugins entry point)."""
