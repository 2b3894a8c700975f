"""Step-aligned I/O: what each training step read and wrote, per file.

A StepSeries listens to the recorder's collects while a profiling window is
open. Step markers (Keras batches, `Trace(step_num=...)`, `tfdarshan.step`)
close an interval; its per-file deltas go to the step that was running, or,
for I/O between steps (prefetching), to the step that starts next. What
happens before the first step begins (imports, MPI_Init, building the model
and the pipeline) is the set-up, and what follows the last step's end the
wind-down: each is an entry of its own (series.SETUP_STEP, AFTER_STEPS), so
a step's time is only ever its own batch. The entries of a window add up to
the window exactly. Work per step is proportional to the files touched in
that step. Each entry also counts what the process read from storage
beyond its calls: its major page faults (getrusage) and the bytes it had
read from block devices (getrusage's ru_inblock, readahead included),
the measures there are of what reads through memory maps cost: a step
that mapped a file's pages with neither read them from memory."""
from __future__ import annotations

import resource
import threading
from typing import List, Optional

import numpy as np

from tfdarshan.capture import _native
from tfdarshan.steps.series import (AFTER_STEPS, CUT_COLUMN, FIELDS, FILE_COLUMNS, IO_WALL_COLUMN,  # noqa: F401
                                   SETUP_STEP, STEP_COLUMNS, TIME_FIELDS, WINDOW_STEP, step_totals)
from tfdarshan.steps.entries import StepEntries, frames  # noqa: F401 (frames: the flight recorder's too)

R = _native.ROW_INDEX

_lock = threading.Lock()
_series: "List[StepSeries]" = []
# callables (event, step) told about every marker, e.g. to open a window at step A
observers: List = []
# while an IOProfileCallback drives steps, Trace(step_num) markers are not counted twice
keras_driving = {"count": 0}


def mark_begin(step: int) -> None:
    """A step starts in every open series."""
    for fn in list(observers):
        fn("begin", step)
    for s in list(_series):
        s.begin(step)


def mark_end(step: int) -> None:
    for s in list(_series):
        s.end(step)
    for fn in list(observers):
        fn("end", step)


def active() -> bool:
    """Is anyone listening for step markers?"""
    return bool(_series) or bool(observers)


class StepSeries:
    """Listens to the recorder's collects while a window is open and keeps
    the window's step entries (steps/entries.py). With a journal
    (logs/live_series.py) every event also goes to disk as it happens, so a
    process killed at any moment leaves its series up to its last collect."""

    def __init__(self, recorder, source: str = "any", journal=None):
        self._rec = recorder
        self._clock = recorder._clock or _native.clock()
        # the window opened just before: the set-up (or a window without
        # steps) starts here, not at the first collect, which may come late
        self._book = StepEntries(_native.now_ticks(), storage_reads(), count_busy=True)
        self.source = source
        self.journal = journal
        recorder.add_listener(self._on_interval)
        with _lock:
            _series.append(self)

    @property
    def last_step(self) -> Optional[dict]:
        return self._book.last_step

    @property
    def cut_step(self) -> Optional[int]:
        return self._book.cut_step

    # -------------------------------------------------------- recorder side
    def _on_interval(self, interval) -> None:
        busy = int(getattr(interval, "busy_ticks", 0))
        if busy:
            self._book.busy(busy)
            if self.journal is not None:
                self.journal.busy(busy)
        if len(interval.index) == 0:
            return
        rows = step_rows(interval.index, interval.before, interval.after)
        if len(rows):
            self._book.rows(rows)
            if self.journal is not None:
                self.journal.rows(rows, self._rec._ids, interval.now_ticks)

    # --------------------------------------------------------- step markers
    def begin(self, step: int) -> None:
        with self._rec._lock:
            self._rec.collect()
            now = _native.now_ticks()
            self._book.begin(step, now, storage_reads())
            if self.journal is not None:
                self.journal.begin(step, now)

    def end(self, step: int) -> None:
        with self._rec._lock:
            self._rec.collect()
            now = _native.now_ticks()
            self._book.end(step, now, storage_reads())
            if self.journal is not None:
                self.journal.end(step, now)

    def finish(self) -> None:
        """Called after the window's last collect: leftovers go to the open
        step, else to the wind-down after the last step (or to the window as
        a whole when no step began)."""
        self._rec.remove_listener(self._on_interval)
        with _lock:
            if self in _series:
                _series.remove(self)
        with self._rec._lock:
            now = _native.now_ticks()
            self._book.finish(now, storage_reads())
            if self.journal is not None:
                self.journal.finish(now)

    def cancel(self) -> None:
        self._rec.remove_listener(self._on_interval)
        with _lock:
            if self in _series:
                _series.remove(self)

    # ------------------------------------------------------------- results
    def frames(self, window_start_ticks: int):
        """(per-step totals, per-file per-step rows); times in seconds from
        the window start; record ids are Darshan's."""
        return frames(self._book.entries, self._rec._ids, self._clock.ticks_per_second, window_start_ticks,
                      self._book.cut_step)


def storage_reads() -> list:
    """The process's reads from storage so far, as STORAGE_COLUMNS: its
    major page faults and the bytes it had read from block devices
    (ru_inblock, /proc/self/io read_bytes in 512-byte units), all its
    threads', from one getrusage."""
    use = resource.getrusage(resource.RUSAGE_SELF)
    return [use.ru_majflt, use.ru_inblock * 512]


def step_rows(index: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """What an interval adds to a step: rows of (record index, module, the
    series' field deltas...) for the records whose fields changed."""
    cols = [R[f] for f in FIELDS.values()]
    delta = after[:, cols] - before[:, cols]
    keep = delta.any(axis=1)
    return np.column_stack([index[keep], after[keep, R["MODULE"]], delta[keep]])
