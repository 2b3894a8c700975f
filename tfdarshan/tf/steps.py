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
that step."""
from __future__ import annotations

import threading
from typing import List, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import _native
from tfdarshan.logs.series import (AFTER_STEPS, CUT_COLUMN, FIELDS, FILE_COLUMNS, IO_WALL_COLUMN,  # noqa: F401
                                   SETUP_STEP, STEP_COLUMNS, TIME_FIELDS, WINDOW_STEP)

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
    def __init__(self, recorder, source: str = "any"):
        self._rec = recorder
        self._clock = recorder._clock or _native.clock()
        self._pending: List[np.ndarray] = []     # per-file deltas not yet given a step
        self._pending_busy = 0                   # ticks with input I/O in flight, not yet given a step
        # the window opened just before: the set-up (or a window without
        # steps) starts here, not at the first collect, which may come late
        self._pending_start: int = _native.now_ticks()
        self._open: Optional[int] = None
        self._began = False              # has any step begun?
        self._steps: List[dict] = []
        self._files: List[np.ndarray] = []
        self.source = source
        self.last_step: Optional[dict] = None
        self.cut_step: Optional[int] = None
        recorder.add_listener(self._on_interval)
        with _lock:
            _series.append(self)

    # -------------------------------------------------------- recorder side
    def _on_interval(self, interval) -> None:
        self._pending_busy += int(getattr(interval, "busy_ticks", 0))
        if len(interval.index) == 0:
            return
        rows = step_rows(interval.index, interval.before, interval.after)
        if len(rows):
            self._pending.append(rows)

    def _flush(self, step: int) -> None:
        """Give what accumulated since the last boundary to `step`."""
        now = _native.now_ticks()
        start = self._pending_start
        rows = np.concatenate(self._pending) if self._pending else np.zeros((0, 2 + len(FIELDS)), dtype=np.int64)
        self._pending = []
        self._pending_start = now
        busy, self._pending_busy = self._pending_busy, 0
        if len(rows):
            # one row per file per step
            order = np.argsort(rows[:, 0], kind="stable")
            rows = rows[order]
            uniq, first = np.unique(rows[:, 0], return_index=True)
            summed = np.add.reduceat(rows[:, 2:], first, axis=0)
            rows = np.column_stack([uniq, rows[first, 1], summed])
        if self._steps and self._steps[-1]["step"] == step:
            entry = self._steps[-1]          # the same step continues (end after begin)
            entry["end"] = now
            entry["rows"].append(rows)
            entry["busy"] = entry.get("busy", 0) + busy
        else:
            entry = {"step": step, "start": start, "end": now, "rows": [rows], "busy": busy}
            self._steps.append(entry)
        # the step's totals, once, for tfdarshan.stats()
        totals = entry.get("totals", np.zeros(len(FIELDS), dtype=np.int64))
        entry["totals"] = totals + (rows[:, 2:].sum(axis=0) if len(rows) else 0)
        if step >= 0:
            self.last_step = entry

    # --------------------------------------------------------- step markers
    def begin(self, step: int) -> None:
        with self._rec._lock:
            self._rec.collect()
            if self._open is not None:
                self._flush(self._open)      # a step that never ended
            if not self._began:
                self._flush(SETUP_STEP)      # everything before the first step is set-up
                self._began = True
            self._flush(step)                # I/O since the last step belongs to this one
            self._open = step

    def end(self, step: int) -> None:
        with self._rec._lock:
            self._rec.collect()
            self._flush(step if self._open is None else self._open)
            self._open = None

    def finish(self) -> None:
        """Called after the window's last collect: leftovers go to the open
        step, else to the wind-down after the last step (or to the window as
        a whole when no step began)."""
        self._rec.remove_listener(self._on_interval)
        with _lock:
            if self in _series:
                _series.remove(self)
        # a step still running when the window closed was cut by it: its end
        # is the window's, and may hold profiler shutdown work (Keras' trace
        # export runs before the batch-end marker reaches us)
        self.cut_step = self._open
        if self._open is not None:
            self._flush(self._open)
        else:
            self._flush(AFTER_STEPS if self._began else WINDOW_STEP)

    def cancel(self) -> None:
        self._rec.remove_listener(self._on_interval)
        with _lock:
            if self in _series:
                _series.remove(self)

    # ------------------------------------------------------------- results
    def frames(self, window_start_ticks: int):
        """(per-step totals, per-file per-step rows); times in seconds from
        the window start; record ids are Darshan's."""
        return frames(self._steps, self._rec._ids, self._clock.ticks_per_second, window_start_ticks,
                      self.cut_step)


def step_rows(index: np.ndarray, before: np.ndarray, after: np.ndarray) -> np.ndarray:
    """What an interval adds to a step: rows of (record index, module, the
    series' field deltas...) for the records whose fields changed."""
    cols = [R[f] for f in FIELDS.values()]
    delta = after[:, cols] - before[:, cols]
    keep = delta.any(axis=1)
    return np.column_stack([index[keep], after[keep, R["MODULE"]], delta[keep]])


def frames(entries: List[dict], ids: np.ndarray, ticks_per_second: float, window_start_ticks: int,
           cut_step: Optional[int] = None):
    """The step series' two frames from step entries ({step, start, end (ticks),
    rows: [arrays of step_rows]}): per-step totals and per-step per-file rows."""
    file_parts, per_step = [], []
    for e in entries:
        rows = np.concatenate(e["rows"]) if e["rows"] else np.zeros((0, 2 + len(FIELDS)), dtype=np.int64)
        if len(rows) > 1:
            order = np.argsort(rows[:, 0], kind="stable")
            rows = rows[order]
            uniq, first = np.unique(rows[:, 0], return_index=True)
            rows = np.column_stack([uniq, rows[first, 1], np.add.reduceat(rows[:, 2:], first, axis=0)])
        df = pd.DataFrame(rows[:, 2:], columns=list(FIELDS))
        df.insert(0, "module", np.where(rows[:, 1] == _native.MODULE_STDIO, "STDIO", "POSIX"))
        df.insert(0, "record_id", ids[rows[:, 0].astype(np.int64)] if len(rows) else np.zeros(0, np.uint64))
        df.insert(0, "step", e["step"])
        file_parts.append(df)
        totals = {k: int(df[k].sum()) for k in FIELDS}
        per_step.append({"step": e["step"], "start": (e["start"] - window_start_ticks),
                           "end": (e["end"] - window_start_ticks), "files": len(df), **totals,
                         IO_WALL_COLUMN: e.get("busy", 0)})
    files = pd.concat(file_parts, ignore_index=True) if file_parts else pd.DataFrame(columns=FILE_COLUMNS)
    steps = pd.DataFrame(per_step, columns=STEP_COLUMNS + [IO_WALL_COLUMN])
    steps[CUT_COLUMN] = (steps["step"] == cut_step) & (steps["step"] >= 0)
    hz = ticks_per_second
    # the union of the step's calls, never longer than the step (spans are clipped to collects, a step's
    # ends are read just after them)
    steps[IO_WALL_COLUMN] = np.minimum(steps[IO_WALL_COLUMN].astype(np.float64),
                                       (steps["end"] - steps["start"]).clip(lower=0).astype(np.float64)) / hz
    for df in (files, steps):
        for c in TIME_FIELDS:
            df[c] = df[c].astype(np.float64) / hz
    steps["start"] = steps["start"].astype(np.float64) / hz
    steps["end"] = steps["end"].astype(np.float64) / hz
    files["record_id"] = files["record_id"].astype(np.uint64)
    for c in FIELDS:
        if c not in TIME_FIELDS:
            files[c] = files[c].astype(np.int64)
            steps[c] = steps[c].astype(np.int64)
    return steps, files
