"""The public functions, bound to the process-wide recorder."""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterator, Optional, Sequence

from tfdarshan import _native
from tfdarshan.recorder import Recorder, Window
from tfdarshan.snapshot import Snapshot

RECORDER = Recorder()


def attach(include: Optional[Sequence[str]] = None, exclude: Optional[Sequence[str]] = None, *,
           trace: Optional[bool] = None, record_cap: Optional[int] = None,
           trace_memory: Optional[int] = None) -> bool:
    """Start recording file I/O in this process (no LD_PRELOAD needed).

    include: path prefixes always recorded (beats every exclusion; /dev/shm/
      is included by default). exclude: extra prefixes, or '*suffix'
      patterns, not to record (Darshan's system directories, Python's own
      install and .so/.py/.pyc files are excluded by default).
    trace: also keep a per-operation trace (DXT), within trace_memory bytes.
    record_cap: files recorded per module; further files are folded into
      one record and counted (snapshot().meta["folded_files"]).
    Returns False, changing nothing, if already attached."""
    fresh = RECORDER.attach(include, exclude, trace=trace, record_cap=record_cap,
                            trace_memory=trace_memory)
    if not fresh and (include or exclude):
        warnings.warn("tfdarshan is already attached; the new include/exclude lists were not applied",
                      stacklevel=2)
    return fresh


def detach() -> bool:
    """Stop recording and put every patched call back; False if not attached."""
    return RECORDER.detach()


def is_attached() -> bool:
    return RECORDER.attached


def snapshot() -> Snapshot:
    """Counters of every file since the first attach (empty if never attached)."""
    return RECORDER.snapshot()


class Profile:
    """What `profile()` yields: `.snapshot` is set when the block ends."""

    def __init__(self, window: Window):
        self._window = window
        self.snapshot: Optional[Snapshot] = None

    @property
    def start(self) -> Snapshot:
        return self._window.start


@contextlib.contextmanager
def profile(include=None, exclude=None, *, trace: Optional[bool] = None) -> Iterator[Profile]:
    """Record the I/O of a block: `with tfdarshan.profile() as p: ...`.

    Attaches if needed (and detaches afterwards if it did)."""
    attached_here = attach(include, exclude, trace=trace) if not is_attached() else False
    p = Profile(RECORDER.open_window())
    try:
        yield p
    finally:
        p.snapshot = p._window.close()
        if attached_here:
            detach()


suppressed = _native.suppressed
