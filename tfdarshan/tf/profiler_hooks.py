"""The tf.profiler driver of profiling sessions: every TensorFlow profiler
session (`tf.profiler.experimental.start/stop`, and the `profiler_v2`
functions that `Profile` and Keras reach) opens and closes one, and
`Trace(step_num=...)` markers give its steps."""
from __future__ import annotations

import functools
import pathlib
import socket
import sys

from tfdarshan.logs.logdir import session_root
from tfdarshan.tf import capture_watch, patching, session, steps

PROFILER = "tensorflow.python.profiler.profiler_v2"
TRACE = "tensorflow.python.profiler.trace"
API_MODULES = ("tensorflow._api.v2.profiler.experimental", "tensorflow._api.v2.compat.v2.profiler.experimental")
SERVER_MODULES = tuple(f"{m}.server" for m in API_MODULES)

_current = None                                     # the session of the running profiler
_local_profiler = False                             # this process's own tf.profiler is on


def patch_profiler(mod) -> None:
    patching.patch(mod, "start", _wrap_start)
    patching.patch(mod, "stop", _wrap_stop)
    patching.patch(mod, "start_server", _wrap_start_server)
    for names, attrs in ((API_MODULES, {"start": "start", "stop": "stop"}),
                         (SERVER_MODULES, {"start": "start_server"})):
        for name in names:
            api = sys.modules.get(name)
            if api is None:
                continue
            for attr, ours in attrs.items():
                current = getattr(api, attr, None)
                if current is getattr(mod, ours).__tfdarshan_original__:
                    setattr(api, attr, getattr(mod, ours))
                    patching.patched.append((api, attr, current))


def _wrap_start_server(orig):
    @functools.wraps(orig)
    def start_server(port):
        orig(port)
        # remote captures (client.trace, TensorBoard's capture button) record I/O too
        patching.safely(capture_watch.start, local_session_open)
    return start_server


def local_session_open() -> bool:
    """Is a tf.profiler session of this process (not a remote capture) running?"""
    return _local_profiler


def patch_trace(mod) -> None:
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
            if step is not None and steps.active() and not steps.keras_driving["count"]:
                patching.safely(steps.mark_begin, int(step))
            return orig(self)
        return __enter__

    def make_exit(orig):
        @functools.wraps(orig)
        def __exit__(self, *exc):
            result = orig(self, *exc)
            step = getattr(self, "_tfdarshan_step", None)
            if step is not None and steps.active() and not steps.keras_driving["count"]:
                patching.safely(steps.mark_end, int(step))
            return result
        return __exit__

    patching.patch(cls, "__init__", make_init)
    patching.patch(cls, "__enter__", make_enter)
    patching.patch(cls, "__exit__", make_exit)


# -------------------------------------------------------- profiler sessions
def _wrap_start(orig):
    @functools.wraps(orig)
    def start(logdir, options=None):
        global _local_profiler
        # from before TensorFlow raises its trace level until after it lowers
        # it in stop(): the capture watcher must not take this for a capture
        _local_profiler = True
        try:
            orig(logdir, options)       # if TensorFlow refuses, we never started
        except BaseException:
            _local_profiler = False
            raise
        patching.safely(_on_start, logdir)
    return start


def _wrap_stop(orig):
    @functools.wraps(orig)
    def stop(save=True):
        global _current, _local_profiler
        with patching.lock:
            closing, _current = _current, None
        if closing is not None:
            # Our window ends before TensorFlow exports its profile: the
            # export's own writes (<host>.xplane.pb, MBs) are not training
            # I/O, and the shim is detached while TensorFlow's code runs.
            patching.safely(closing.stop)
        try:
            orig(save)                  # if it raises, nothing of ours is written
        finally:
            _local_profiler = False
        if closing is not None and closing.snapshot is not None and save:
            patching.safely(_write, closing)
    return stop


def _on_start(logdir) -> None:
    global _current
    if not logdir:                      # Keras' warm-up session writes nothing
        return
    with patching.lock:
        if _current is not None:
            _current.cancel()
        _current = session.open_session(str(logdir), label="tf.profiler")


def _write(closing) -> None:
    closing.write(find_run_directory(closing.logdir, closing.started_wall))


def find_run_directory(logdir: pathlib.Path, since: float) -> pathlib.Path:
    """The session directory the profiler just wrote (newest with our host's
    xplane written after `since`), or a new one named like XProf's."""
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
    # XProf wrote nothing: ours goes where XProf does not list it
    return best or session_root(logdir, beside_xprof=False) / session.run_directory_name(since)


def unpatch_api_modules() -> None:
    """API modules imported after we patched bound our wrappers themselves."""
    bound = [(m, a) for m in API_MODULES for a in ("start", "stop")] + [(m, "start") for m in SERVER_MODULES]
    for name, attr in bound:
        api = sys.modules.get(name)
        current = getattr(api, attr, None) if api is not None else None
        original = getattr(current, "__tfdarshan_original__", None)
        if original is not None:
            setattr(api, attr, original)


def cancel_current() -> None:
    global _current
    if _current is not None:
        _current.cancel()
        _current = None
