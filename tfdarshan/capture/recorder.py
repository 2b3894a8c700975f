"""The process-wide recorder: attaches the shim, folds what each collect
returns into running totals, and turns them into Snapshots and windows."""
from __future__ import annotations

import collections
import dataclasses
import os
import socket
import threading
import weakref
from typing import Dict, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import _native, counters as C, config, coverage, served
from tfdarshan.capture import kernel_io as K
from tfdarshan.capture import heatmap as H
from tfdarshan.capture import mounts as M
from tfdarshan.capture.snapshot import Snapshot, _with_top4, empty_dxt, empty_extra, empty_values, extra_frame

R = _native.ROW_INDEX
W = len(_native.ROW_FIELDS)
EXT_FIELDS = [f[2:] for f in _native.ROW_FIELDS if f.startswith("I_")]
I0 = R["I_" + EXT_FIELDS[0]]
NE = len(EXT_FIELDS)
# a row followed by run-long extremes, as the counter conversion reads it
FULL_INDEX = {**R, **{f: W + j for j, f in enumerate(EXT_FIELDS)}}
MODULE_NAMES = {_native.MODULE_POSIX: "POSIX", _native.MODULE_STDIO: "STDIO"}
STD_STREAMS = {"<STDIN>", "<STDOUT>", "<STDERR>"}


NO_VALUES = np.zeros((0, 4), dtype=np.int64)
# a record is in the Darshan tables when one of Darshan's sums or extremes is
# set, never for kernel-side I/O alone (kernel_io.py: those go to extra)
KERNEL_COLUMNS = np.array([R[f] for f in K.FIELDS.values()])
DARSHAN_SUMS = np.array([i for i in range(R["MODULE"] + 1, I0) if i not in set(KERNEL_COLUMNS)])


class Interval:
    """One collect: the records touched, their totals before and after, and
    the access-size/stride frequencies of the records whose frequencies
    changed, as they are after it (rows of record index, kind, value, count)."""
    __slots__ = ("index", "before", "after", "segments", "heat", "epoch", "now_ticks", "values", "busy_ticks")

    def __init__(self, index, before, after, segments, heat, epoch, now_ticks, values=NO_VALUES, busy_ticks=0):
        self.index, self.before, self.after = index, before, after
        self.segments, self.heat, self.epoch, self.now_ticks = segments, heat, epoch, now_ticks
        self.values, self.busy_ticks = values, busy_ticks     # busy: ticks with input I/O in flight


def latest_values(parts: List[np.ndarray]) -> np.ndarray:
    """Frequency rows from chunks in time order, each record's from the
    newest chunk that has it (a chunk holds a record's whole table)."""
    parts = [x for x in parts if len(x)]
    if len(parts) <= 1:
        return parts[0] if parts else NO_VALUES
    rows = np.concatenate(parts)
    chunk = np.repeat(np.arange(len(parts)), [len(x) for x in parts])
    newest = np.full(int(rows[:, 0].max()) + 1, -1, dtype=np.int64)
    np.maximum.at(newest, rows[:, 0], chunk)
    return rows[chunk == newest[rows[:, 0]]]


# column groups of the extremes, by how they combine
_FIRST = [j for j, f in enumerate(EXT_FIELDS) if f.endswith("_START")]
_TIMED = [j for j, f in enumerate(EXT_FIELDS) if f in ("MAX_READ_TIME", "MAX_WRITE_TIME")]
_SIZES = [j + 1 for j in _TIMED]
_MAX = [j for j in range(NE) if j not in _FIRST and j not in _SIZES]
_BIG = np.iinfo(np.int64).max


def combine_extremes(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Extremes over two spans, row by row (Darshan's rules): maxima and
    last times take the larger, first times the earlier non-zero, and the
    slowest call's size follows its time."""
    out = np.maximum(a, b)
    fa, fb = a[:, _FIRST], b[:, _FIRST]
    out[:, _FIRST] = np.where((fa != 0) & (fb != 0), np.minimum(fa, fb), fa + fb)
    later = b[:, _TIMED] > a[:, _TIMED]
    out[:, _SIZES] = np.where(later, b[:, _SIZES], a[:, _SIZES])
    return out


def fold_extremes(index: np.ndarray, ext: np.ndarray):
    """Combine the extremes of rows with the same record index."""
    if len(index) == 0:
        return index, ext
    order = np.argsort(index, kind="stable")
    index, ext = index[order], ext[order]
    uniq, starts = np.unique(index, return_index=True)
    out = np.empty((len(uniq), NE), dtype=np.int64)
    out[:, _MAX] = np.maximum.reduceat(ext[:, _MAX], starts, axis=0)
    m = np.minimum.reduceat(np.where(ext[:, _FIRST] == 0, _BIG, ext[:, _FIRST]), starts, axis=0)
    out[:, _FIRST] = np.where(m == _BIG, 0, m)
    group = np.repeat(np.arange(len(uniq)), np.diff(np.append(starts, len(index))))
    for t, size in zip(_TIMED, _SIZES):
        # the slowest call of each group, and its size
        k = np.lexsort((ext[:, t], group))
        last = np.append(starts[1:], len(index)) - 1
        out[:, size] = ext[k[last], size]
    return uniq, out


class Recorder:
    def __init__(self):
        self._lock = threading.RLock()
        self._cum = np.zeros((0, W), dtype=np.int64)
        self._ext = np.zeros((0, NE), dtype=np.int64)
        self._seen = np.zeros(0, dtype=bool)
        self._ids = np.zeros(0, dtype=np.uint64)
        self._paths = np.zeros(0, dtype=object)
        self._named = np.zeros(0, dtype=bool)        # _paths[i] is known
        self._modules = np.zeros(0, dtype=np.int64)
        # frequency rows (index, kind, value, count): a folded base, then each
        # collect's; folded when read, or when the chunks outgrow the base
        self._values: List[np.ndarray] = []
        self._extremes: List[list] = []          # [seq, index, interval extremes]
        self._live = collections.Counter()  # seqs of live snapshots
        self._windows: "weakref.WeakSet[Window]" = weakref.WeakSet()
        self._listeners: List = []
        self._clock: Optional[_native.Clock] = None
        self._meta = {"folded_files": 0, "trace_dropped": 0, "threads": 0, "seq": 0, "heat_unbinned": 0}
        self._heat = H.Accumulator()
        self._ticker: Optional[threading.Thread] = None
        self._ticker_stop = threading.Event()
        self.settings: Optional[config.Settings] = None
        self.trace_cap = 0      # bytes of trace a window may hold, as the shim's own buffer
        self._pid = os.getpid()

    @classmethod
    def offline(cls, ids, paths, modules, clock, counts) -> "Recorder":
        """A recorder holding another process's records (its live file:
        capture/live.py), to build their Snapshot with snapshot_of."""
        rec = cls()
        rec._ids, rec._paths, rec._modules, rec._clock = ids, paths, modules, clock
        rec._meta.update(counts)
        return rec

    # ------------------------------------------------------------ attach
    def attach(self, include=None, exclude=None, *, trace=None, record_cap=None,
               trace_memory=None, kernel_io=None, staged=None) -> bool:
        s = config.settings(include, exclude, trace=trace, record_cap=record_cap,
                            trace_memory=trace_memory, kernel_io=kernel_io, staged=staged)
        with self._lock:
            self._after_fork()
            if s.staged and not _native.is_attached():      # before the first patched call
                served.serve(s.staged, check_ahead=s.staged_check_ahead)
            fresh = _native.attach(record_cap=s.record_cap, include=s.include, exclude=s.exclude,
                                   exclude_suffixes=s.exclude_suffixes, trace=s.trace,
                                   trace_cap_bytes=s.trace_memory, chain_library=s.chain_library,
                                   kernel_io=s.kernel_io)
            if fresh:
                self.settings = s
                self.trace_cap = s.trace_memory if s.trace else 0
                self._clock = _native.clock()
                self._start_ticker()
            return fresh

    def set_trace(self, on: bool, cap_bytes: int) -> None:
        """Turn the per-operation trace on (within cap_bytes) or off."""
        _native.set_trace(on, cap_bytes)
        self.trace_cap = cap_bytes if on else 0

    def _start_ticker(self) -> None:
        # the shim's heatmap ring holds about 50 s of bins: drain it well before
        if self._ticker is not None and self._ticker.is_alive():
            return
        self._ticker_stop.clear()
        self._ticker = threading.Thread(target=self._tick, name="tfdarshan-collector", daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._ticker_stop.wait(10.0):
            if not _native.is_attached():
                continue
            try:
                self.collect()
            except Exception:  # never let the background collector break the job
                pass

    def detach(self) -> bool:
        with self._lock:
            done = _native.detach()
            self.collect()   # what happened while attached belongs to the totals
            return done

    @property
    def attached(self) -> bool:
        return _native.is_attached()

    def add_listener(self, fn) -> None:
        """fn(interval) is called after every collect (step series, stats)."""
        with self._lock:
            self._listeners.append(fn)

    def remove_listener(self, fn) -> None:
        with self._lock:
            if fn in self._listeners:
                self._listeners.remove(fn)

    def _after_fork(self) -> None:
        # a forked child counts afresh (the shim reset its records)
        if os.getpid() != self._pid:
            self.__init__()

    # ----------------------------------------------------------- collect
    def _grow(self, n: int) -> None:
        old = len(self._seen)
        if n <= old:
            return
        cap = max(n, 2 * old, 256)
        self._cum = np.concatenate([self._cum, np.zeros((cap - old, W), dtype=np.int64)])
        self._ext = np.concatenate([self._ext, np.zeros((cap - old, NE), dtype=np.int64)])
        self._seen = np.concatenate([self._seen, np.zeros(cap - old, dtype=bool)])
        self._ids = np.concatenate([self._ids, np.zeros(cap - old, dtype=np.uint64)])
        self._paths = np.concatenate([self._paths, np.full(cap - old, None, dtype=object)])
        self._named = np.concatenate([self._named, np.zeros(cap - old, dtype=bool)])
        self._modules = np.concatenate([self._modules, np.zeros(cap - old, dtype=np.int64)])

    def collect(self) -> Optional[Interval]:
        """Close the shim's current interval and fold it in; None if the
        shim was never attached in this process."""
        with self._lock:
            self._after_fork()
            try:
                got = _native.collect()
            except _native.NativeError:
                return None
            if self._clock is None:
                self._clock = _native.clock()
            self._grow(got.n_records)
            idx = got.rows[:, R["INDEX"]] if len(got.rows) else np.zeros(0, dtype=np.int64)
            fresh = np.concatenate([idx, got.segments[:, 0]]) if len(got.segments) else idx
            for i in np.unique(fresh[~self._named[fresh]]) if len(fresh) else ():
                rid, mod, path = _native.record_info(int(i))
                self._ids[i], self._modules[i], self._paths[i] = rid, mod, os.fsdecode(path)
                self._named[i] = True
            before = self._cum[idx]          # fancy indexing copies
            self._cum[idx] = got.rows
            self._ext[idx] = combine_extremes(self._ext[idx], got.rows[:, I0:I0 + NE])
            self._seen[idx] = True
            if len(got.values):
                self._values.append(got.values)
                if sum(map(len, self._values[1:])) > max(len(self._values[0]), 1 << 16):
                    self._values = [latest_values(self._values)]
            self._meta.update(folded_files=got.folded_files, trace_dropped=got.trace_dropped,
                              threads=got.n_threads, seq=got.epoch, heat_unbinned=got.heat_unbinned)
            # heat stays numpy here: this runs at every step boundary
            heat = (got.heat, got.heat_bin_ticks / self._clock.ticks_per_second)
            self._heat.add_fine(*heat)
            if len(idx) and self._live:      # extremes only while a snapshot may need them
                self._extremes.append([got.epoch, idx, got.rows[:, I0:I0 + NE].copy()])
            self._compact()
            interval = Interval(idx, before, got.rows, got.segments, heat, got.epoch, got.now_ticks,
                                got.values, got.busy_ticks)
            for w in list(self._windows):
                w._feed(interval)
            for fn in list(self._listeners):
                fn(interval)
            return interval

    def _compact(self) -> None:
        """Keep interval extremes only where a live snapshot may need them,
        folding runs that no live snapshot splits."""
        if not self._live:
            self._extremes.clear()
            return
        first = min(self._live)
        kept = [e for e in self._extremes if e[0] > first]
        merged: List[list] = []
        for e in kept:
            if merged and merged[-1][0] not in self._live:
                prev = merged.pop()
                idx, ext = fold_extremes(np.concatenate([prev[1], e[1]]), np.concatenate([prev[2], e[2]]))
                e = [e[0], idx, ext]
            merged.append(e)
        self._extremes = merged

    def _release(self, seq: int) -> None:
        with self._lock:
            self._live[seq] -= 1
            if self._live[seq] <= 0:
                del self._live[seq]

    # ---------------------------------------------------------- snapshots
    def snapshot(self) -> Snapshot:
        with self._lock:
            self.collect()
            return self._build_snapshot()

    def _build_snapshot(self) -> Snapshot:
        seq = self._meta["seq"]
        idx = np.nonzero(self._seen)[0]
        end = float(self.clock.seconds(np.array([_native.now_ticks()]))[0]) if self._clock else 0.0
        snap = self.snapshot_of(idx, self._cum[idx], self._ext[idx], self.values(),
                                {"seq": seq, "end": end, "recorder": id(self)}, self._heat.rows(),
                                self._window_extremes)
        snap.meta.update({"served": m} if (m := served.snapshot_meta(snap.posix, snap.stdio)) else {})
        self._live[seq] += 1
        weakref.finalize(snap, self._release, seq)
        return snap

    def values(self) -> np.ndarray:
        """Every record's frequency rows as of the last collect."""
        with self._lock:
            self._values = [latest_values(self._values)] if self._values else []
            return self._values[0] if self._values else NO_VALUES

    @property
    def clock(self) -> _native.Clock:
        return self._clock or _native.Clock(0, 1e9, 0.0, False)

    def snapshot_of(self, idx: np.ndarray, cum: np.ndarray, ext: np.ndarray, values: np.ndarray,
                    meta: Dict, heat: pd.DataFrame, extremes=None) -> Snapshot:
        """A Snapshot of the given records: their running totals `cum`, extremes
        `ext` and access-size frequency rows `values` (index, kind, value, count)."""
        rows = np.hstack([cum, ext])
        clock = self.clock
        darshan = (cum[:, DARSHAN_SUMS] != 0).any(axis=1) | (ext != 0).any(axis=1)
        kernel = (cum[:, KERNEL_COLUMNS] != 0).any(axis=1)
        frames, extra = {}, []
        for code, module in MODULE_NAMES.items():
            sel = (self._modules[idx] == code) & (darshan | kernel)
            mi, mrows, in_darshan = idx[sel], rows[sel], darshan[sel]
            if module == "STDIO":
                # like Darshan's output: unused standard streams are dropped
                unused = np.isin(self._paths[mi].astype(str), list(STD_STREAMS)) & \
                    (mrows[:, R["READS"]] == 0) & (mrows[:, R["WRITES"]] == 0)
                mi, mrows, in_darshan = mi[~unused], mrows[~unused], in_darshan[~unused]
            cols = C.from_native(module, mrows[in_darshan], FULL_INDEX, clock)
            # object, not pandas' Arrow strings: non-UTF-8 names keep their
            # surrogate escapes and round-trip to the original bytes
            df = pd.DataFrame({"record_id": self._ids[mi[in_darshan]],
                               "path": pd.Series(self._paths[mi[in_darshan]], dtype=object), **cols},
                              columns=C.columns(module))
            frames[module] = df
            extra.append(pd.DataFrame({"record_id": self._ids[mi], "module": module,
                                       "path": pd.Series(self._paths[mi], dtype=object),
                                       "ZERO_READS": mrows[:, R["ZERO_READS"]],
                                       **K.from_rows(mrows, R, clock.ticks_per_second)}))
        posix_idx = idx[self._modules[idx] == _native.MODULE_POSIX]
        v = values[np.isin(values[:, 0], posix_idx)]
        if len(v):
            values_df = pd.DataFrame({"record_id": self._ids[v[:, 0]], "kind": v[:, 1].astype(np.int8),
                                      "value": v[:, 2], "count": v[:, 3]})
        else:
            values_df = empty_values()
        posix = _with_top4(frames["POSIX"], values_df)
        extra_df = extra_frame(pd.concat(extra, ignore_index=True)) if extra else empty_extra()
        full_meta = {"format": "tfdarshan", "seq": None, "start": 0.0, "end": 0.0,
                     "origin_unix_time": clock.origin_unix_time, "hostname": socket.gethostname(),
                     "pid": os.getpid(), "recorder": None,
                     "folded_files": self._meta["folded_files"],
                     "trace_dropped": self._meta["trace_dropped"], "threads": self._meta["threads"],
                     "heat_unbinned": self._meta["heat_unbinned"],
                     "mounts": [[m.point, m.fstype] for m in M.current()],
                     "record_cap": self.settings.record_cap if self.settings else None, **meta}
        return Snapshot(posix, frames["STDIO"], values_df, extra_df, empty_dxt(), full_meta, extremes, heat)

    def _window_extremes(self, later: Snapshot, earlier: Snapshot) -> Optional[Dict[str, pd.DataFrame]]:
        """Exact extremes over (earlier, later] from the interval extremes kept per collect."""
        mine = lambda s: s.meta.get("recorder") == id(self) and s.meta.get("pid") == os.getpid()
        if not (mine(later) and mine(earlier)):
            return None
        a, b = earlier.meta["seq"], later.meta["seq"]
        with self._lock:
            parts = [e for e in self._extremes if a < e[0] <= b]
        if parts:
            idx, ext = fold_extremes(np.concatenate([p[1] for p in parts]),
                                     np.concatenate([p[2] for p in parts]))
        else:
            idx, ext = np.zeros(0, dtype=np.int64), np.zeros((0, NE), dtype=np.int64)
        return self.extremes_frames(idx, ext)

    def extremes_frames(self, idx: np.ndarray, ext: np.ndarray) -> Dict[str, pd.DataFrame]:
        """Interval extremes of records as Darshan's columns, by module,
        indexed by record id (what Snapshot subtraction takes as exact)."""
        rows = np.zeros((len(idx), W + NE), dtype=np.int64)
        rows[:, W:] = ext
        out = {}
        for code, module in MODULE_NAMES.items():
            sel = self._modules[idx] == code if len(idx) else np.zeros(0, dtype=bool)
            cols = C.from_native(module, rows[sel], FULL_INDEX, self.clock)
            keep = {c: v for c, v in cols.items()
                    if C.kind(module, c) in (C.MAX, C.MAXTIME, C.MAXTIME_SIZE, C.FIRST, C.LAST)}
            out[module] = pd.DataFrame(keep, index=self._ids[idx[sel]])
        return out

    # ------------------------------------------------------------ windows
    def open_window(self) -> "Window":
        return Window(self)


class Window:
    """A profiling window: counters between open and close, with the
    per-operation trace gathered while it was open."""

    def __init__(self, recorder: Recorder):
        self._rec = recorder
        self._io_start = coverage.proc_io()
        self._segments: List[np.ndarray] = []
        self._kept_bytes = 0
        self._dropped = 0
        self._heat: List[tuple] = []
        with recorder._lock:
            self.start = recorder.snapshot()
            recorder._windows.add(self)
        self.result: Optional[Snapshot] = None

    def _feed(self, interval: Interval) -> None:
        seg = interval.segments
        if len(seg):
            # the trace cap holds for the window, not only for the shim's buffer,
            # which a collect empties: keep what fits, count the rest as dropped
            room = max(self._rec.trace_cap - self._kept_bytes, 0) // max(seg.itemsize * seg.shape[1], 1)
            if len(seg) > room:
                self._dropped += len(seg) - room
                seg = seg[:room].copy()     # a view would keep the whole interval's trace alive
            if len(seg):
                self._segments.append(seg)
                self._kept_bytes += seg.nbytes
        if len(interval.heat[0]):
            self._heat.append(interval.heat)

    def close(self) -> Snapshot:
        rec = self._rec
        with rec._lock:
            end = rec.snapshot()
            rec._windows.discard(self)
        snap = end - self.start
        snap.meta["trace_dropped"] = int(snap.meta.get("trace_dropped", 0)) + self._dropped
        snap.meta["coverage"] = coverage.share(snap, self._io_start, coverage.proc_io())
        heat = H.compact(pd.concat([H.from_fine(b, w) for b, w in self._heat], ignore_index=True)) \
            if self._heat else H.empty()
        snap = dataclasses.replace(snap, _heat=heat)
        if self._segments:
            s = np.concatenate(self._segments)
            clock = rec._clock
            dxt = pd.DataFrame({"record_id": rec._ids[s[:, 0]],
                                "op": np.where(s[:, 1] == 1, "write", "read"),
                                "offset": s[:, 2], "length": s[:, 3],
                                "start": clock.seconds(s[:, 4]), "end": clock.seconds(s[:, 5])})
            snap = dataclasses.replace(snap, _dxt=dxt)
        self.result = snap
        return snap


# the process has one recorder: every window and session reads it
RECORDER = Recorder()
