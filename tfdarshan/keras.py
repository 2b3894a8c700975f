"""`tfdarshan.keras.IOProfileCallback`, where the docs show it (the
callback lives in tfdarshan.tf.keras)."""
from tfdarshan.tf.keras import IOProfileCallback

__all__ = ["IOProfileCallback"]
