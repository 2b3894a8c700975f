"""Captures through the profiler server (`client.trace`, TensorBoard's
capture button): the worker writes XProf's profile itself, but no Python
start/stop of ours runs, so the window is found from TensorFlow's state.

`tf.profiler.experimental.server.start(port)` attaches the shim and starts
a watcher thread. Every interval (100 ms) it reads TensorFlow's exported
trace level (`tsl::profiler::internal::g_trace_level`, -1 when no profiler
runs): a capture opens a session window, its end closes it. The window's
edges are therefore within one interval of the capture's. Then the watcher
waits for the `*.xplane.pb` this process writes under plugins/profile/<run>/
(the shim sees the write) and writes the session's files beside it, named
after it (`<host>_<port>.darshan` for `<host>_<port>.xplane.pb`), with the
I/O lines merged into it. A process that exits while the watcher writes
waits for that write (at most XPLANE_WAIT), so a capture just taken is kept."""
from __future__ import annotations

import atexit
import ctypes
import logging
import os
import re
import threading
import time
from typing import Callable, Optional

logger = logging.getLogger("tfdarshan")
LEVEL_SYMBOL = "_ZN3tsl8profiler8internal13g_trace_levelE"
TRACING_DISABLED = -1
INTERVAL = 0.1
XPLANE = re.compile(r".*/plugins/profile/[^/]+/([^/]+)\.xplane\.pb$")
XPLANE_WAIT = 120.0                 # seconds for TensorFlow to write the profile after the capture

_watcher: "Optional[CaptureWatcher]" = None
_lock = threading.Lock()


def trace_level() -> Optional[ctypes.c_int]:
    """TensorFlow's trace level, read in place, or None (not loaded, or a
    TensorFlow that does not export it)."""
    import tensorflow  # noqa: F401  (already imported by whoever starts a server)
    lib = os.path.join(os.path.dirname(tensorflow.__file__), "libtensorflow_framework.so.2")
    try:
        return ctypes.c_int.in_dll(ctypes.CDLL(lib, mode=os.RTLD_NOLOAD | os.RTLD_LAZY), LEVEL_SYMBOL)
    except (OSError, ValueError):
        return None


def start(local_session_open: Callable[[], bool]) -> None:
    """Watch for captures from now on (idempotent); `local_session_open`
    tells a remote capture from this process's own tf.profiler session,
    which sets the same trace level."""
    global _watcher
    with _lock:
        if _watcher is not None:
            return
        level = trace_level()
        if level is None:
            logger.warning("tfdarshan: this TensorFlow does not export its trace level; "
                        "profiler-server captures will have no I/O data")
            return
        _watcher = CaptureWatcher(level, local_session_open)
        _watcher.start()
        atexit.register(_watcher.finish_writing)


class CaptureWatcher(threading.Thread):
    def __init__(self, level: ctypes.c_int, local_session_open: Callable[[], bool], interval: float = INTERVAL):
        super().__init__(name="tfdarshan-capture-watch", daemon=True)
        self._level = level
        self._local = local_session_open
        self._interval = interval
        self.captures = 0
        self._writing = threading.Lock()    # held while a capture's files are written

    def finish_writing(self) -> None:
        """At exit: let a capture's write in progress end (the thread is a daemon)."""
        if self._writing.acquire(timeout=XPLANE_WAIT):
            self._writing.release()

    def run(self) -> None:
        from tfdarshan.capture.recorder import RECORDER
        from tfdarshan.tf import session
        RECORDER.attach()                   # a profiled worker: attached while its server runs
        current = None
        while True:
            time.sleep(self._interval)
            active = self._level.value != TRACING_DISABLED
            try:
                if active and current is None and not self._local():
                    current = session.open_session(None, label="capture")
                elif not active and current is not None:
                    with self._writing:
                        closing, current = current, None
                        closing.stop()
                        self._write(closing)
            except Exception as e:          # noqa: BLE001 - the worker must go on training
                logger.warning("tfdarshan: profiler-server capture failed: %s", e)
                current = None

    def _write(self, closing) -> None:
        """Wait for this process's XPlane of the capture, then write beside it."""
        import pathlib
        from tfdarshan.capture.recorder import RECORDER, R
        since, deadline = closing.started_wall, time.time() + XPLANE_WAIT
        # TensorFlow writes the profile through stdio (fopen/fwrite): first every
        # file written so far, then only those written in each later interval
        snap = RECORDER.snapshot()
        written = set(snap.posix.loc[snap.posix["POSIX_BYTES_WRITTEN"] > 0, "path"]) | \
            set(snap.stdio.loc[snap.stdio["STDIO_BYTES_WRITTEN"] > 0, "path"])
        col = R["BYTES_WRITTEN"]
        profiles = set()
        while time.time() < deadline:
            profiles |= {p for p in written if XPLANE.fullmatch(p)}
            for path in sorted(profiles):
                if not _finished(path, since):
                    continue                 # not this capture's, or still being written
                stem = XPLANE.fullmatch(path).group(1)
                closing.write(pathlib.Path(path).parent, stem=stem, xplane_path=pathlib.Path(path),
                              metadata={"source": "profiler server capture"})
                self.captures += 1
                return
            time.sleep(self._interval)
            iv = RECORDER.collect()
            grew = iv.index[iv.after[:, col] > iv.before[:, col]] if iv is not None and len(iv.index) else []
            written = {RECORDER._paths[i] for i in grew}
        logger.warning("tfdarshan: no profile was written within %.0f s of a capture; its I/O is dropped",
                    XPLANE_WAIT)


def _finished(path: str, since: float) -> bool:
    """Written for this capture, and no longer growing."""
    try:
        st = os.stat(path)
        if st.st_mtime < since - 2:
            return False
        time.sleep(INTERVAL)
        return os.stat(path).st_size == st.st_size > 0
    except OSError:
        return False
