"""The plugin's name, in a module of its own (TensorBoard's convention)."""
PLUGIN_NAME = "tfdarshan"
