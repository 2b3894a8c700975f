"""The step series' bookkeeping, as a pure value fed events: the per-file
rows each collect adds, and step boundaries with their times (ticks).

Markers close an interval: what accumulated goes to the step that was
running or, for I/O between steps (prefetching), to the step that starts
next. What comes before the first step is the set-up (SETUP_STEP), what
follows the last step's end the wind-down (AFTER_STEPS), and a window with
no markers is one entry (WINDOW_STEP). The live process (tf/steps.py) and a
replay of its journal (logs/live_series.py, after the process died) feed the
same events to this one class, so both give the same series."""
from __future__ import annotations

from typing import List, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import _native
from tfdarshan.logs.series import (AFTER_STEPS, CUT_COLUMN, FIELDS, FILE_COLUMNS, SETUP_STEP, STEP_COLUMNS,
                                   TIME_FIELDS, WINDOW_STEP)

ROW_WIDTH = 2 + len(FIELDS)          # record key, module, then the series' fields


def _no_rows() -> np.ndarray:
    return np.zeros((0, ROW_WIDTH), dtype=np.int64)


class StepEntries:
    """Entries {step, start, end (ticks), rows: [arrays of ROW_WIDTH columns],
    totals} built from events; `cut_step` is the step a window's end cut short."""

    def __init__(self, start_ticks: int):
        self._pending: List[np.ndarray] = []     # rows not yet given a step
        self._pending_start = int(start_ticks)
        self.open: Optional[int] = None          # the step running now
        self._began = False                      # has any step begun?
        self.entries: List[dict] = []
        self.last_step: Optional[dict] = None    # the last training step flushed
        self.cut_step: Optional[int] = None
        self.finished = False

    # ------------------------------------------------------------- events
    def rows(self, rows: np.ndarray) -> None:
        """A collect's rows (record key, module, field deltas)."""
        if len(rows) and not self.finished:
            self._pending.append(rows)

    def begin(self, step: int, now: int) -> None:
        if self.finished:
            return              # a marker racing the window's close: the window has ended
        if self.open is not None:
            self._flush(self.open, now)      # a step that never ended
        if not self._began:
            self._flush(SETUP_STEP, now)     # everything before the first step is set-up
            self._began = True
        self._flush(step, now)               # I/O since the last step belongs to this one
        self.open = step

    def end(self, step: int, now: int) -> None:
        if self.finished:
            return
        self._flush(step if self.open is None else self.open, now)
        self.open = None

    def finish(self, now: int) -> None:
        """The window's last collect is in: leftovers go to the open step
        (cut short by the window's end, which may hold profiler shutdown
        work), else to the wind-down (or to the window when no step began)."""
        if self.finished:
            return
        self.finished = True
        self.cut_step = self.open
        if self.open is not None:
            self._flush(self.open, now)
        else:
            self._flush(AFTER_STEPS if self._began else WINDOW_STEP, now)

    # --------------------------------------------------------------- flush
    def _flush(self, step: int, now: int) -> None:
        """Give what accumulated since the last boundary to `step`."""
        start = self._pending_start
        rows = np.concatenate(self._pending) if self._pending else _no_rows()
        self._pending = []
        self._pending_start = now
        if len(rows):
            rows = _one_row_a_file(rows)
        if self.entries and self.entries[-1]["step"] == step:
            entry = self.entries[-1]          # the same step continues (end after begin)
            entry["end"] = now
            entry["rows"].append(rows)
        else:
            entry = {"step": step, "start": start, "end": now, "rows": [rows]}
            self.entries.append(entry)
        # the step's totals, once, for tfdarshan.stats()
        totals = entry.get("totals", np.zeros(len(FIELDS), dtype=np.int64))
        entry["totals"] = totals + (rows[:, 2:].sum(axis=0) if len(rows) else 0)
        if step >= 0:
            self.last_step = entry


def _one_row_a_file(rows: np.ndarray) -> np.ndarray:
    order = np.argsort(rows[:, 0], kind="stable")
    rows = rows[order]
    uniq, first = np.unique(rows[:, 0], return_index=True)
    return np.column_stack([uniq, rows[first, 1], np.add.reduceat(rows[:, 2:], first, axis=0)])


def frames(entries: List[dict], ids: np.ndarray, ticks_per_second: float, window_start_ticks: int,
           cut_step: Optional[int] = None):
    """The step series' two frames from step entries ({step, start, end (ticks),
    rows: [arrays of ROW_WIDTH columns, keyed by index into `ids`]}): per-step
    totals and per-step per-file rows; times in seconds from the window
    start; record ids are Darshan's."""
    file_parts, per_step = [], []
    for e in entries:
        rows = np.concatenate(e["rows"]) if e["rows"] else _no_rows()
        if len(rows) > 1:
            rows = _one_row_a_file(rows)
        df = pd.DataFrame(rows[:, 2:], columns=list(FIELDS))
        df.insert(0, "module", np.where(rows[:, 1] == _native.MODULE_STDIO, "STDIO", "POSIX"))
        df.insert(0, "record_id", ids[rows[:, 0].astype(np.int64)] if len(rows) else np.zeros(0, np.uint64))
        df.insert(0, "step", e["step"])
        file_parts.append(df)
        totals = {k: int(df[k].sum()) for k in FIELDS}
        per_step.append({"step": e["step"], "start": (e["start"] - window_start_ticks),
                         "end": (e["end"] - window_start_ticks), "files": len(df), **totals})
    files = pd.concat(file_parts, ignore_index=True) if file_parts else pd.DataFrame(columns=FILE_COLUMNS)
    steps = pd.DataFrame(per_step, columns=STEP_COLUMNS)
    steps[CUT_COLUMN] = (steps["step"] == cut_step) & (steps["step"] >= 0)
    hz = ticks_per_second
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


__all__ = ["StepEntries", "frames", "ROW_WIDTH", "WINDOW_STEP", "SETUP_STEP", "AFTER_STEPS"]
