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
from tfdarshan.steps.series import (AFTER_STEPS, CUT_COLUMN, FIELDS, FILE_COLUMNS, SETUP_STEP, STEP_COLUMNS,
                                   STORAGE_COLUMNS, TIME_FIELDS, WINDOW_STEP, IO_WALL_COLUMN,
                                   step_totals)

ROW_WIDTH = 2 + len(FIELDS)          # record key, module, then the series' fields


def _no_rows() -> np.ndarray:
    return np.zeros((0, ROW_WIDTH), dtype=np.int64)


class StepEntries:
    """Entries {step, start, end (ticks), rows: [arrays of ROW_WIDTH columns],
    totals[, storage]} built from events; `cut_step` is the step a window's
    end cut short. Events may carry the process's storage reads so far
    (STORAGE_COLUMNS, from tf/steps.storage_reads): each entry then holds
    what it added ("storage"); a replayed journal carries none. With
    `count_busy`, each entry holds the ticks a read or metadata call was in
    flight on any thread ("busy", from the collects' busy_ticks)."""

    def __init__(self, start_ticks: int, storage_at: Optional[list] = None, count_busy: bool = False):
        self._storage_at = storage_at
        self._count_busy = count_busy
        self._pending_busy = 0                   # busy ticks not yet given a step
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

    def busy(self, ticks: int) -> None:
        """A collect's ticks with input I/O in flight (native/records_busy.c)."""
        if not self.finished:
            self._pending_busy += int(ticks)

    def begin(self, step: int, now: int, storage: Optional[list] = None) -> None:
        if self.finished:
            return              # a marker racing the window's close: the window has ended
        if self.open is not None:
            self._flush(self.open, now, storage)      # a step that never ended
        if not self._began:
            self._flush(SETUP_STEP, now, storage)     # everything before the first step is set-up
            self._began = True
        self._flush(step, now, storage)               # I/O since the last step belongs to this one
        self.open = step

    def end(self, step: int, now: int, storage: Optional[list] = None) -> None:
        if self.finished:
            return
        self._flush(step if self.open is None else self.open, now, storage)
        self.open = None

    def finish(self, now: int, storage: Optional[list] = None) -> None:
        """The window's last collect is in: leftovers go to the open step
        (cut short by the window's end, which may hold profiler shutdown
        work), else to the wind-down (or to the window when no step began)."""
        if self.finished:
            return
        self.finished = True
        self.cut_step = self.open
        if self.open is not None:
            self._flush(self.open, now, storage)
        else:
            self._flush(AFTER_STEPS if self._began else WINDOW_STEP, now, storage)

    # --------------------------------------------------------------- flush
    def _flush(self, step: int, now: int, storage: Optional[list] = None) -> None:
        """Give what accumulated since the last boundary to `step`."""
        start = self._pending_start
        taken = None
        if storage is not None and self._storage_at is not None:
            # (a forked child's counts start again from its own zero)
            taken = [max(b - a, 0) for a, b in zip(self._storage_at, storage)]
            self._storage_at = storage
        busy, self._pending_busy = self._pending_busy, 0
        rows = np.concatenate(self._pending) if self._pending else _no_rows()
        self._pending = []
        self._pending_start = now
        if len(rows):
            rows = _one_row_a_file(rows)
        if self.entries and self.entries[-1]["step"] == step:
            entry = self.entries[-1]          # the same step continues (end after begin)
            entry["end"] = now
            entry["rows"].append(rows)
            if taken is not None and "storage" in entry:
                entry["storage"] = [a + b for a, b in zip(entry["storage"], taken)]
            if self._count_busy:
                entry["busy"] = entry.get("busy", 0) + busy
        else:
            entry = {"step": step, "start": start, "end": now, "rows": [rows]}
            if taken is not None:
                entry["storage"] = taken
            if self._count_busy:
                entry["busy"] = busy
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
    totals and per-step per-file rows (one a file and entry, in entry order,
    then by key); times in seconds from the window start; record ids are
    Darshan's. All entries at once: its cost follows the rows, not the steps."""
    parts = [r for e in entries for r in e["rows"] if len(r)]
    counts = [sum(len(r) for r in e["rows"]) for e in entries]
    rows = np.concatenate(parts) if parts else _no_rows()
    entry = np.repeat(np.arange(len(entries), dtype=np.int64), counts)
    if len(rows):
        order = np.lexsort((rows[:, 0], entry))
        rows, entry = rows[order], entry[order]
        first = np.flatnonzero(np.r_[True, (entry[1:] != entry[:-1]) | (rows[1:, 0] != rows[:-1, 0])])
        if len(first) < len(rows):          # a file in several collects of one entry: one row
            rows = np.column_stack([rows[first, 0], rows[first, 1], np.add.reduceat(rows[:, 2:], first, axis=0)])
            entry = entry[first]
    hz = ticks_per_second
    step_of = np.array([e["step"] for e in entries], dtype=np.int64)
    n = len(entries)
    per = np.zeros((n, len(FIELDS)), dtype=np.int64)       # per entry: the sums of its rows
    if len(rows):
        starts = np.flatnonzero(np.r_[True, entry[1:] != entry[:-1]])
        per[entry[starts]] = np.add.reduceat(rows[:, 2:], starts, axis=0)
    # each frame built once from typed columns (a column a field, times in seconds)
    fields = lambda block: {c: (block[:, j] / hz if c in TIME_FIELDS else block[:, j].astype(np.int64))  # noqa: E731
                            for j, c in enumerate(FIELDS)}
    files = pd.DataFrame({
        "step": step_of[entry] if len(rows) else np.zeros(0, dtype=np.int64),
        "record_id": (ids[rows[:, 0].astype(np.int64)] if len(rows) else np.zeros(0)).astype(np.uint64),
        "module": np.where(rows[:, 1] == _native.MODULE_STDIO, "STDIO", "POSIX").astype(object),
        **fields(rows[:, 2:])}, columns=FILE_COLUMNS)
    steps = pd.DataFrame({
        "step": step_of,
        "start": np.array([e["start"] - window_start_ticks for e in entries], dtype=np.float64) / hz,
        "end": np.array([e["end"] - window_start_ticks for e in entries], dtype=np.float64) / hz,
        "files": np.bincount(entry, minlength=n).astype(np.int64), **step_totals(fields(per))}, columns=STEP_COLUMNS)
    steps[CUT_COLUMN] = (step_of == cut_step) & (step_of >= 0) if cut_step is not None else np.zeros(n, dtype=bool)
    if entries and all("busy" in e for e in entries):
        # the union of the step's calls, never longer than the step (spans are clipped to collects, a
        # step's ends are read just after them)
        length = np.array([max(e["end"] - e["start"], 0) for e in entries], dtype=np.float64)
        steps[IO_WALL_COLUMN] = np.minimum(np.array([e["busy"] for e in entries], dtype=np.float64), length) / hz
    if entries and all("storage" in e for e in entries):     # (a replayed journal's and the flight recorder's have none)
        for i, c in enumerate(STORAGE_COLUMNS):
            steps[c] = np.array([e["storage"][i] for e in entries], dtype=np.int64)
    return steps, files


__all__ = ["StepEntries", "frames", "ROW_WIDTH", "WINDOW_STEP", "SETUP_STEP", "AFTER_STEPS"]
