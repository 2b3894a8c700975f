"""The public functions, bound to the process-wide recorder."""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterator, Optional, Sequence

from tfdarshan.capture import _native, served
from tfdarshan.capture.recorder import RECORDER
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.logs.logdir import session_root
from tfdarshan.measures.time_in_calls import FILE_TIME
from tfdarshan.tf import flight_recorder as flight, hooks, session as tf_session, steps


def attach(include: Optional[Sequence[str]] = None, exclude: Optional[Sequence[str]] = None, *,
           trace: Optional[bool] = None, record_cap: Optional[int] = None,
           trace_memory: Optional[int] = None, kernel_io: Optional[bool] = None,
           staged: Optional[str] = None) -> bool:
    """Start recording file I/O in this process (no LD_PRELOAD needed).

    include: path prefixes always recorded (beats every exclusion; /dev/shm/
      is included by default). exclude: extra prefixes, or '*suffix'
      patterns, not to record (Darshan's system directories, Python's own
      install and .so/.py/.pyc files are excluded by default).
    trace: also keep a per-operation trace (DXT), within trace_memory bytes.
    record_cap: files recorded per module; further files are folded into
      one record and counted (snapshot().meta["folded_files"]).
    kernel_io: also count what Darshan cannot see, kernel-side copies and
      reads through mapped files, in columns of our own (on by default;
      TFDARSHAN_KERNEL_IO=0); Darshan's counters are the same either way.
    staged: serve each read-only open and stat of a staged source from its
      copy, "all" that this node holds or those of a manifest (its path;
      TFDARSHAN_STAGED); see serve_staged().
    Returns False, changing nothing, if already attached."""
    fresh = RECORDER.attach(include, exclude, trace=trace, record_cap=record_cap,
                            trace_memory=trace_memory, kernel_io=kernel_io, staged=staged)
    if not fresh and (include or exclude or staged):
        warnings.warn("tfdarshan is already attached; the new include/exclude lists or staged copies were not "
                      "applied (serve_staged() changes the staged copies while attached)", stacklevel=2)
    return fresh


def serve_staged(staged: Optional[str] = "all", *, check_ahead: bool = False) -> dict:
    """Serve staged copies in place of their sources from now on, while
    attached: "all" that this node holds (`tfdarshan stage` records them),
    or those of a manifest (its path); None stops. A source is checked at
    its first use (still the size and mtime it had when staged, its copy on
    this node), or now with check_ahead. Returns how many are served."""
    table = served.serve(staged, check_ahead=check_ahead)
    return {"staged": staged, "copies": len(table.sources)}


def served_summary() -> dict:
    """What serving staged copies did in this process so far (served.summary)."""
    return served.summary(RECORDER.snapshot().meta.get("served"))


def detach() -> bool:
    """Stop recording and put every patched call back; False if not attached."""
    return RECORDER.detach()


def is_attached() -> bool:
    return RECORDER.attached


def snapshot() -> Snapshot:
    """Counters of every file since the first attach (empty if never attached)."""
    return RECORDER.snapshot()


class Profile:
    """What `profile()` yields. When the block ends: `.snapshot` (the
    window's counters), `.steps` and `.step_files` (the step series), and
    `.files` (what was written, when a logdir was given)."""

    def __init__(self, session):
        self._session = session
        self.snapshot: Optional[Snapshot] = None
        self.steps = None
        self.step_files = None
        self.files = {}

    @property
    def start(self) -> Snapshot:
        return self._session.window.start


@contextlib.contextmanager
def profile(include=None, exclude=None, *, trace: Optional[bool] = None,
            logdir: Optional[str] = None) -> Iterator[Profile]:
    """Record the I/O of a block: `with tfdarshan.profile() as p: ...`.

    Attaches if needed (and detaches afterwards if it did). Steps marked in
    the block (tfdarshan.step, Trace(step_num=...), Keras batches) give the
    step series. With `logdir`, the window's Darshan log and series are
    written to logdir/plugins/tfdarshan/<time>/."""
    attached_here = attach(include, exclude) if not is_attached() else False
    session = tf_session.open_session(logdir, label="profile", trace=trace)
    p = Profile(session)
    try:
        yield p
    finally:
        try:
            p.snapshot = session.stop()
            p.steps, p.step_files = session.steps, session.step_files
            if logdir:
                p.files = session.write(session_root(logdir, beside_xprof=False)
                                        / tf_session.run_directory_name(session.started_wall))
        finally:
            if attached_here:
                detach()


suppressed = _native.suppressed


def enable() -> None:
    """Record I/O in every tf.profiler session and Keras profile window
    (done by `import tfdarshan` unless TFDARSHAN_NO_HOOKS is set)."""
    hooks.enable()


def disable() -> None:
    """Undo enable(): TensorFlow's and Keras' functions are restored."""
    hooks.disable()


@contextlib.contextmanager
def step(number: int) -> Iterator[None]:
    """Mark a training step in custom loops: `with tfdarshan.step(i): ...`."""
    steps.mark_begin(int(number))
    try:
        yield
    finally:
        steps.mark_end(int(number))


def stats() -> dict:
    """Cumulative I/O since attach and the last completed step's, cheaply
    (for a progress bar or a log line); does not close an interval."""
    totals = _native.live_totals()
    clock = RECORDER._clock
    out = {"attached": _native.is_attached(), **{k: v for k, v in totals.items() if k != "io_ticks"}}
    # the shim's io_ticks: reads, writes and metadata calls (measures/time_in_calls.py's file_time)
    out[FILE_TIME] = totals.get("io_ticks", 0) / clock.ticks_per_second if clock else 0.0
    last = None
    for series in list(steps._series):
        if series.last_step is not None:
            last = series.last_step
    if last is not None:
        summed = dict(zip(steps.FIELDS, last["totals"]))
        step = {f: int(v) for f, v in steps.step_totals(summed).items()}
        for f in steps.TIME_FIELDS:
            step[f] = step[f] / clock.ticks_per_second
        step["step"] = last["step"]
        step["duration"] = (last["end"] - last["start"]) / clock.ticks_per_second
        out["last_step"] = step
    else:
        out["last_step"] = None
    return out


def flight_recorder(seconds: Optional[float] = None, logdir: Optional[str] = None,
                    **policy) -> "flight.FlightRecorder":
    """Keep the last `seconds` (default 120) of I/O and write a session into
    logdir (default tfdarshan_logs)/plugins/tfdarshan/ when a step is slow,
    on SIGUSR2, or when asked (`.dump()`). policy: slow_factor (3.0: a step
    over 3x the running median is slow), warmup_steps (20), min_gap (300 s
    between automatic dumps), max_dumps (10), memory_cap (64 MiB of ring),
    interval (0.1 s). If one is running already (`tfdarshan run
    --flight-recorder`), it is returned as it is. `.stats()` tells the
    ring's memory, what it dropped and the collector's CPU."""
    return flight.start(logdir, seconds, **policy)
