"""The Keras driver's hook: Keras' CallbackList gets an IOProfileCallback
next to a TensorBoard callback that profiles (or while a step series is
being recorded), so Keras batches are the steps."""
from __future__ import annotations

import functools

from tfdarshan.tf import patching, steps

CALLBACKS = "keras.src.callbacks.callback_list"


def patch_callback_list(mod) -> None:
    def make_init(orig):
        @functools.wraps(orig)
        def __init__(self, *args, **kwargs):
            orig(self, *args, **kwargs)
            patching.safely(_add_io_callback, self, kwargs.get("model"), kwargs)
        return __init__
    patching.patch(mod.CallbackList, "__init__", make_init)


def _add_io_callback(cblist, model, kwargs) -> None:
    """Next to a TensorBoard callback that profiles, or while any window
    records steps (`tfdarshan run`, `profile()`), step markers from ours."""
    # imported here, not at the top: this module's hook runs while Keras itself
    # is still being imported, and the callback class needs all of Keras
    from tfdarshan.tf.keras import IOProfileCallback
    cbs = cblist.callbacks
    if any(isinstance(c, IOProfileCallback) for c in cbs):
        return
    profiling = any(type(c).__name__ == "TensorBoard" and (getattr(c, "_start_batch", 0) or
                                                          getattr(c, "_stop_batch", 0)) for c in cbs)
    if not profiling and not steps.active():
        return                      # no window open and none waiting for a step
    cb = IOProfileCallback()
    cbs.append(cb)
    if model is not None:
        cb.set_model(model)
    params = {k: v for k, v in kwargs.items() if k not in ("callbacks", "add_history", "add_progbar", "model")}
    if params:
        cb.set_params(params)
