"""Make every TensorFlow profiler session record step-aligned I/O.

`enable()` wraps the Python functions that start and stop a profiler
session (`tf.profiler.experimental.start/stop`, and the `profiler_v2`
functions that `Profile` and Keras reach), `Trace(step_num=...)` step
markers, and Keras' CallbackList (which then adds an IOProfileCallback
next to a profiling TensorBoard callback). `disable()` puts every original
back. If TensorFlow is not imported yet, the wrapping happens when it is."""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.util
import logging
import os
import pathlib
import socket
import sys
import threading
import time
from typing import Callable, Dict, List, Optional, Tuple

from tfdarshan import steps

log = logging.getLogger("tfdarshan")

PROFILER = "tensorflow.python.profiler.profiler_v2"
TRACE = "tensorflow.python.profiler.trace"
CALLBACKS = "keras.src.callbacks.callback_list"
API_MODULES = ("tensorflow._api.v2.profiler.experimental", "tensorflow._api.v2.compat.v2.profiler.experimental")

_lock = threading.RLock()
_enabled = False
_patched: List[Tuple[object, str, object]] = []      # (owner, attribute, original)
_current = None                                     # the ProfileSession of the running profiler
_keras_steps = threading.local()                    # set while an IOProfileCallback drives steps
keras_driving = {"count": 0}


# ----------------------------------------------------------------- patching
def _patch(owner, attr: str, make: Callable) -> None:
    original = getattr(owner, attr)
    if getattr(original, "__tfdarshan_original__", None) is not None:
        return                      # already ours
    wrapper = make(original)
    wrapper.__tfdarshan_original__ = original
    setattr(owner, attr, wrapper)
    _patched.append((owner, attr, original))


def _patch_profiler(mod) -> None:
    _patch(mod, "start", _wrap_start)
    _patch(mod, "stop", _wrap_stop)
    for name in API_MODULES:
        api = sys.modules.get(name)
        if api is not None:
            for attr in ("start", "stop"):
                current = getattr(api, attr, None)
                if current is getattr(mod, attr).__tfdarshan_original__:
                    setattr(api, attr, getattr(mod, attr))
                    _patched.append((api, attr, current))


def _patch_trace(mod) -> None:
    cls = mod.Trace

    def make_init(orig):
        @functools.wraps(orig)
        def __init__(self, name, **kwargs):
            self._tfdarshan_step = kwargs.get("step_num")
            orig(self, name, **kwargs)
        return __init__

    def make_enter(orig):
        @functools.wraps(orig)
        def __enter__(self):
            step = getattr(self, "_tfdarshan_step", None)
            if step is not None and steps.active() and not keras_driving["count"]:
                _safely(steps.mark_begin, int(step))
            return orig(self)
        return __enter__

    def make_exit(orig):
        @functools.wraps(orig)
        def __exit__(self, *exc):
            result = orig(self, *exc)
            step = getattr(self, "_tfdarshan_step", None)
            if step is not None and steps.active() and not keras_driving["count"]:
                _safely(steps.mark_end, int(step))
            return result
        return __exit__

    _patch(cls, "__init__", make_init)
    _patch(cls, "__enter__", make_enter)
    _patch(cls, "__exit__", make_exit)


def _patch_keras(mod) -> None:
    def make_init(orig):
        @functools.wraps(orig)
        def __init__(self, *args, **kwargs):
            orig(self, *args, **kwargs)
            _safely(_add_io_callback, self, kwargs.get("model"), kwargs)
        return __init__
    _patch(mod.CallbackList, "__init__", make_init)


def _add_io_callback(cblist, model, kwargs) -> None:
    """Next to a TensorBoard callback that profiles, step markers from ours."""
    from tfdarshan.keras import IOProfileCallback
    cbs = cblist.callbacks
    if any(isinstance(c, IOProfileCallback) for c in cbs):
        return
    profiling = any(type(c).__name__ == "TensorBoard" and (getattr(c, "_start_batch", 0) or
                                                          getattr(c, "_stop_batch", 0)) for c in cbs)
    if not profiling and not steps.observers:
        return
    cb = IOProfileCallback()
    cbs.append(cb)
    if model is not None:
        cb.set_model(model)
    params = {k: v for k, v in kwargs.items() if k not in ("callbacks", "add_history", "add_progbar", "model")}
    if params:
        cb.set_params(params)


def _safely(fn, *args):
    """Our bookkeeping must never break the training job."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        log.warning("tfdarshan: %s failed: %s", getattr(fn, "__name__", fn), e)
        return None


# -------------------------------------------------------- profiler sessions
def _wrap_start(orig):
    @functools.wraps(orig)
    def start(logdir, options=None):
        orig(logdir, options)           # if TensorFlow refuses, we never started
        _safely(_on_start, logdir)
    return start


def _wrap_stop(orig):
    @functools.wraps(orig)
    def stop(save=True):
        global _current
        with _lock:
            session, _current = _current, None
        try:
            orig(save)
        except BaseException:
            if session is not None:
                _safely(session.cancel)
            raise
        if session is not None:
            _safely(_on_stop, session, save)
    return stop


def _on_start(logdir) -> None:
    global _current
    if not logdir:                      # Keras' warm-up session writes nothing
        return
    from tfdarshan.api import RECORDER
    from tfdarshan.session import ProfileSession
    with _lock:
        if _current is not None:
            _current.cancel()
        _current = ProfileSession(RECORDER, str(logdir), label="tf.profiler").start()


def _on_stop(session, save: bool) -> None:
    session.stop()
    if not save:
        return
    run_dir = find_run_directory(session.logdir, session.started_wall)
    session.write(run_dir)


def find_run_directory(logdir: pathlib.Path, since: float) -> pathlib.Path:
    """The session directory the profiler just wrote (newest with our host's
    xplane written after `since`), or a new one named like XProf's."""
    from tfdarshan.session import run_directory_name
    base = pathlib.Path(logdir, "plugins", "profile")
    host = socket.gethostname()
    best, best_mtime = None, 0.0
    if base.is_dir():
        for d in base.iterdir():
            xp = d / f"{host}.xplane.pb"
            try:
                m = xp.stat().st_mtime
            except OSError:
                continue
            if m >= since - 2 and m > best_mtime:
                best, best_mtime = d, m
    return best or base / run_directory_name(since)


# ------------------------------------------------------------ import hook
_HOOKS = {PROFILER: _patch_profiler, TRACE: _patch_trace, CALLBACKS: _patch_keras}


class _PostImport(importlib.abc.MetaPathFinder):
    """Patches a module right after it is executed, wherever it is imported."""

    def find_spec(self, name, path=None, target=None):
        if name not in _HOOKS or not _enabled:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                original = loader.exec_module

                class Loader(importlib.abc.Loader):
                    def create_module(self, spec):
                        return loader.create_module(spec)

                    def exec_module(self, module):
                        original(module)
                        with _lock:
                            if _enabled:
                                _safely(_HOOKS[name], module)

                spec.loader = Loader()
                return spec
        return None


_finder = _PostImport()


def enable() -> None:
    """Record I/O in every TensorFlow profiler session from now on."""
    global _enabled
    with _lock:
        if _enabled:
            return
        _enabled = True
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        for name, hook in _HOOKS.items():
            mod = sys.modules.get(name)
            if mod is not None:
                _safely(hook, mod)


def disable() -> None:
    """Put TensorFlow's and Keras' functions back exactly as they were."""
    global _enabled, _current
    with _lock:
        _enabled = False
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        for owner, attr, original in reversed(_patched):
            setattr(owner, attr, original)
        _patched.clear()
        # API modules imported after we patched bound our wrappers themselves
        for name in API_MODULES:
            api = sys.modules.get(name)
            for attr in ("start", "stop"):
                current = getattr(api, attr, None) if api is not None else None
                original = getattr(current, "__tfdarshan_original__", None)
                if original is not None:
                    setattr(api, attr, original)
        if _current is not None:
            _current.cancel()
            _current = None


def enabled() -> bool:
    return _enabled
