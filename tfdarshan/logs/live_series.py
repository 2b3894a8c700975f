"""The step series of a running process, journaled so that it survives the
process: `<stem>.live-steps` beside its live counters (capture/live.py).

The journal holds the events the series is built from (steps/entries.py):
each collect's per-file rows, and each step's begin and end with their
times. A process killed at any moment leaves every event up to its last
collect; replaying them through the same StepEntries gives the series as
the process would have written it then, the step a kill cut short marked
as cut (`cut_by_window_end`), ending at the last collect.

Layout: a header (magic, version, JSON: the series' fields, the clock, the
window's start), then records appended with one write each:
u32 length, u32 CRC-32 of the payload, payload of int64 words (kind, ...).
A record cut short by the kill, or damaged, ends the replay there."""
from __future__ import annotations

import json
import os
import pathlib
import struct
import sys
import zlib
from typing import Iterator, List, Optional, Tuple

import numpy as np

from tfdarshan.errors import TfdarshanError
from tfdarshan.steps.entries import ROW_WIDTH, StepEntries, frames
from tfdarshan.steps.series import FIELDS

SUFFIX = ".live-steps"           # <stem>.live-steps beside <stem>.live
MAGIC = b"TFDSTEP1"
RECORD = struct.Struct("<II")    # payload length, CRC-32
ROWS, BEGIN, END, FINISH, BUSY = 1, 2, 3, 4, 5
MAX_RECORD = 1 << 30             # a length past this is damage, not a record


class LiveSeriesError(TfdarshanError):
    """Not a step journal, or one whose header is damaged."""


class Journal:
    """The writer: one per step series, appending its events. It never
    raises into a collect: a failed write stops the journal and says why once."""

    def __init__(self, path, *, window_start_ticks: int, ticks_per_second: float):
        self.path = pathlib.Path(path)
        self._pid = os.getpid()
        self.failed: Optional[str] = None
        header = json.dumps({"fields": list(FIELDS), "io_wall": True, "ticks_per_second": ticks_per_second,
                             "window_start_ticks": int(window_start_ticks), "pid": self._pid}).encode()
        tmp = self.path.with_name(f".{self.path.name}.{self._pid}.new")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        try:
            os.write(fd, MAGIC + struct.pack("<I", len(header)) + header)
            os.replace(tmp, self.path)
        except BaseException:
            os.close(fd)
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        self._fd = fd

    def rows(self, rows: np.ndarray, ids: np.ndarray, now: int) -> None:
        """A collect's rows (record index, module, deltas), stored by record id."""
        if len(rows):
            keyed = rows.copy()
            keyed[:, 0] = ids[rows[:, 0]].view(np.int64)
            self._append(np.concatenate([[ROWS, now, len(keyed)], keyed.ravel()]))

    def begin(self, step: int, now: int) -> None:
        self._append(np.array([BEGIN, step, now]))

    def end(self, step: int, now: int) -> None:
        self._append(np.array([END, step, now]))

    def finish(self, now: int) -> None:
        self._append(np.array([FINISH, now]))

    def busy(self, ticks: int) -> None:
        """A collect's ticks with input I/O in flight (the step's io_wall)."""
        self._append(np.array([BUSY, ticks]))

    def _append(self, words: np.ndarray) -> None:
        if self._fd < 0 or os.getpid() != self._pid:
            return                      # closed, failed, or a forked child: the journal is its parent's
        payload = words.astype("<i8").tobytes()
        try:
            data = RECORD.pack(len(payload), zlib.crc32(payload)) + payload
            if os.write(self._fd, data) != len(data):
                raise OSError("short write (disk full?)")
        except OSError as e:
            self.failed = e.strerror or str(e)
            print(f"tfdarshan: the step journal {self.path} stopped ({self.failed}); a killed process will "
                  f"leave its counters without their step series", file=sys.stderr)
            self.close(remove=False)

    def close(self, remove: bool = True) -> None:
        if os.getpid() != self._pid:
            return
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if remove:
            try:
                self.path.unlink()
            except OSError:
                pass


def read_events(path) -> Tuple[dict, List[Tuple[int, np.ndarray]], bool]:
    """(header, [(kind, words after the kind)], whether the journal ended
    cleanly: no record cut short or damaged)."""
    data = pathlib.Path(path).read_bytes()
    if len(data) < len(MAGIC) + 4 or data[:len(MAGIC)] != MAGIC:
        raise LiveSeriesError(f"{path}: not a tfdarshan step journal")
    (n,) = struct.unpack_from("<I", data, len(MAGIC))
    at = len(MAGIC) + 4 + n
    try:
        header = json.loads(data[len(MAGIC) + 4:at])
        if header["fields"] != list(FIELDS):
            raise LiveSeriesError(f"{path}: written by another version of tfdarshan (its fields differ)")
        float(header["ticks_per_second"]), int(header["window_start_ticks"])
    except (ValueError, KeyError, TypeError):
        raise LiveSeriesError(f"{path}: damaged step journal header") from None
    events, clean = [], True
    while at < len(data):
        if at + RECORD.size > len(data):
            clean = False
            break
        length, crc = RECORD.unpack_from(data, at)
        payload = data[at + RECORD.size: at + RECORD.size + length]
        if length % 8 or length < 8 or length > MAX_RECORD or len(payload) != length or zlib.crc32(payload) != crc:
            clean = False
            break
        words = np.frombuffer(payload, dtype="<i8").astype(np.int64)
        events.append((int(words[0]), words[1:]))
        at += RECORD.size + length
    return header, events, clean


def _events(events) -> Iterator[Tuple[int, np.ndarray]]:
    """Well-formed events only (a kind this reader knows, with its words)."""
    for kind, w in events:
        if kind == ROWS and len(w) >= 2 and len(w) == 2 + int(w[1]) * ROW_WIDTH:
            yield kind, w
        elif kind in (BEGIN, END) and len(w) == 2:
            yield kind, w
        elif kind in (FINISH, BUSY) and len(w) == 1:
            yield kind, w


def replay(path):
    """(per-step frame, per-file frame, {"finished": the process closed its
    window, "clean": no damaged tail, "last_ticks": the last event's time})
    of a journal: the step series as of the process's last collect."""
    header, events, clean = read_events(path)
    events = list(_events(events))
    keyed = [w[2:].reshape(-1, ROW_WIDTH) for kind, w in events if kind == ROWS]
    ids = np.unique(np.concatenate([k[:, 0] for k in keyed])) if keyed else np.zeros(0, np.int64)
    book = StepEntries(int(header["window_start_ticks"]), count_busy=bool(header.get("io_wall")))
    last = int(header["window_start_ticks"])
    for kind, w in events:
        if kind == ROWS:
            rows = w[2:].reshape(-1, ROW_WIDTH).copy()
            rows[:, 0] = np.searchsorted(ids, rows[:, 0])
            book.rows(rows)
            last = max(last, int(w[0]))
        elif kind == BEGIN:
            last = max(last, int(w[1]))
            book.begin(int(w[0]), last)
        elif kind == END:
            last = max(last, int(w[1]))
            book.end(int(w[0]), last)
        elif kind == BUSY:
            book.busy(int(w[0]))
        else:
            last = max(last, int(w[0]))
            book.finish(last)
    finished = book.finished
    book.finish(last)               # a killed process: what it had collected goes to the step it was in
    steps, files = frames(book.entries, ids.view(np.uint64), float(header["ticks_per_second"]),
                          int(header["window_start_ticks"]), book.cut_step)
    return steps, files, {"finished": finished, "clean": clean, "last_ticks": last}
