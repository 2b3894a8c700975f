"""A continuous, bounded recording: every collect's per-file deltas, kept for
the last `seconds` within a memory cap, from which any window of that time
can be cut afterwards as an ordinary Snapshot.

A collector thread closes an interval every `interval` seconds (100 ms by
default) unless someone else collected more recently (a step marker, a
window): the hot path pays nothing beyond the counters it always keeps. The
collector holds itself to 1 % of one core: when a collect costs more than
1 ms (thousands of files touched from dozens of threads), it waits longer,
up to 2 s, and `stats()` says which interval is in effect.
Each kept interval holds the touched records' totals before and after it,
their interval extremes and access-size frequencies, so a cut window has
Darshan's exact counters, maxima and first/last times. When the cap is
reached the oldest intervals go first, and what they covered is counted."""
from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import Deque, List, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import _native, heatmap as H
from tfdarshan.capture.recorder import I0, NE, R, W, Interval, Recorder, fold_extremes, latest_values
from tfdarshan.capture.snapshot import Snapshot

DEFAULT_INTERVAL = 0.1
DEFAULT_MEMORY = 64 << 20
CPU_SHARE = 0.01                 # of one core, for the collector thread
MAX_INTERVAL = 2.0               # seconds: the longest the collector stretches its interval


@dataclasses.dataclass
class Kept:
    """One interval of the ring: (start, end] in ticks; its rows are
    arena[offset:offset + n]."""
    start: int
    end: int
    offset: int
    n: int
    values: np.ndarray
    heat: tuple
    extra_bytes: int


@dataclasses.dataclass
class Piece:
    """One interval of a cut, copied out of the arena."""
    start: int
    end: int
    index: np.ndarray
    before: np.ndarray
    after: np.ndarray
    values: np.ndarray
    heat: tuple


@dataclasses.dataclass
class Cut:
    """The intervals that closed in (t0, t1], and every record's frequency
    rows as they were before the first of them."""
    t0: int
    t1: int
    pieces: List[Piece]
    values_before: np.ndarray


ROW_BYTES = 2 * W * 8          # a record's totals before and after an interval
R_INDEX = R["INDEX"]


class Ring:
    """The rows live in one preallocated arena (before and after totals), so
    keeping an interval is a copy into memory touched once, not a new
    allocation: the cap holds and steady state takes no page faults."""

    def __init__(self, recorder: Recorder, seconds: float, *, memory_cap: int = DEFAULT_MEMORY,
                 interval: float = DEFAULT_INTERVAL):
        if seconds <= 0 or interval <= 0 or memory_cap <= 0:
            raise ValueError("the ring needs positive seconds, interval and memory cap")
        self._rec = recorder
        self.seconds = float(seconds)
        self.interval = float(interval)
        self.effective_interval = self.interval
        self._cost = 0.0                 # CPU seconds of one collect, smoothed over collects
        self.memory_cap = int(memory_cap)
        # seven eighths of the cap for rows, the rest for frequencies and heat bins
        self._row_cap = max(1, self.memory_cap * 7 // 8 // ROW_BYTES)
        self._extra_cap = self.memory_cap - self._row_cap * ROW_BYTES
        self._before: Optional[np.ndarray] = None
        self._after: Optional[np.ndarray] = None
        self._head = 0
        self._rows = 0
        self._extra = 0
        self._kept: Deque[Kept] = collections.deque()
        self._lock = threading.Lock()
        self._last_end: Optional[int] = None
        # frequency rows as they were before the oldest kept interval (chunks, folded lazily)
        self._base: List[np.ndarray] = []
        self.peak_nbytes = 0
        self.dropped_intervals = 0       # evicted by the cap while still inside `seconds`
        self.dropped_seconds = 0.0
        self.collector_cpu = 0.0         # CPU seconds of the collector thread
        self.collects = 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    @property
    def nbytes(self) -> int:
        return self._rows * ROW_BYTES + self._extra

    # ------------------------------------------------------------ running
    def start(self) -> "Ring":
        self._rec.attach()
        # the arena is written through once now: the collector never takes a
        # page fault (a fault costs microseconds on a VM, and a fresh interval
        # of 1,000 files would touch hundreds of pages)
        if self._after is None:
            self._before = np.ones((self._row_cap, W), dtype=np.int64)
            self._after = np.ones((self._row_cap, W), dtype=np.int64)
        self._stop.clear()
        with self._rec._lock:
            self._rec.collect()          # the ring starts at an interval boundary
            self._base = [self._rec.values()]
            self._rec.add_listener(self._on_interval)
        self._thread = threading.Thread(target=self._run, name="tfdarshan-ring", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop collecting; what is kept stays readable (start() resumes)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._rec.remove_listener(self._on_interval)

    def _run(self) -> None:
        ticks_per_second = self._rec.clock.ticks_per_second
        while not self._stop.is_set():
            last = self._last_end
            since = (_native.now_ticks() - last) / ticks_per_second if last is not None else self.interval
            # the collector keeps to CPU_SHARE of one core: a costly collect (many
            # files, touched from many threads) stretches the interval, up to MAX_INTERVAL
            self.effective_interval = min(max(self.interval, self._cost / CPU_SHARE), MAX_INTERVAL)
            if self._stop.wait(max(self.effective_interval - since, 0.0)):
                break
            if self._last_end != last:
                continue                 # someone else collected meanwhile: wait from that one
            cpu = time.thread_time()
            try:
                self._rec.collect()
            except Exception:            # noqa: BLE001 - never let the collector break the job
                pass
            took = time.thread_time() - cpu
            self.collector_cpu += took
            self._cost = took if self._cost == 0.0 else 0.7 * self._cost + 0.3 * took

    def _on_interval(self, iv: Interval) -> None:
        start = self._last_end if self._last_end is not None else iv.now_ticks
        self._last_end = iv.now_ticks
        self.collects += 1
        n = len(iv.index)
        hz = self._rec.clock.ticks_per_second
        with self._lock:
            horizon = iv.now_ticks - int(self.seconds * hz)
            if n == 0 and not len(iv.heat[0]):
                self._evict(horizon, 0, 0, 0)
                return
            extra = iv.values.nbytes + iv.heat[0].nbytes + 200
            if n > self._row_cap or extra > self._extra_cap:
                self._evict(horizon, 0, 0, 0)
                self.dropped_intervals += 1      # one interval larger than the whole cap
                self.dropped_seconds += (iv.now_ticks - start) / hz
                return
            if self._head + n > self._row_cap:
                self._head = 0                   # wrap: the oldest rows are at the start
            self._evict(horizon, self._head, n, extra)
            at = self._head
            self._before[at:at + n] = iv.before
            self._after[at:at + n] = iv.after
            self._head += n
            self._kept.append(Kept(start, iv.now_ticks, at, n, iv.values, iv.heat, extra))
            self._rows += n
            self._extra += extra
            self.peak_nbytes = max(self.peak_nbytes, self.nbytes)

    def _evict(self, horizon: int, at: int, n: int, extra: int) -> None:
        """Drop the oldest intervals: past the horizon, in the arena rows
        [at, at + n) about to be written, or crowding out `extra` bytes."""
        hz = self._rec.clock.ticks_per_second
        # after a wrap the oldest intervals sit at the arena's end, past the
        # rows about to be written: everything up to the newest one those
        # rows overlap goes, oldest first, so the ring stays one span of time
        through = max((i for i, k in enumerate(self._kept) if n and k.offset < at + n and at < k.offset + k.n),
                      default=-1)
        popped = 0
        while self._kept:
            k = self._kept[0]
            if not (popped <= through or k.end <= horizon or self._extra + extra > self._extra_cap):
                break
            popped += 1
            self._kept.popleft()
            self._rows -= k.n
            self._extra -= k.extra_bytes
            self._base.append(k.values)
            if sum(map(len, self._base[1:])) > max(len(self._base[0]), 1 << 16):
                self._base = [latest_values(self._base)]
            if k.end > horizon:
                self.dropped_intervals += 1
                self.dropped_seconds += (k.end - k.start) / hz

    # ------------------------------------------------------------ reading
    def cut(self, t0: int, t1: int) -> Cut:
        """The kept intervals that closed in (t0, t1], copied out."""
        with self._lock:
            pieces = [Piece(k.start, k.end, self._after[k.offset:k.offset + k.n, R_INDEX].copy(),
                            self._before[k.offset:k.offset + k.n].copy(),
                            self._after[k.offset:k.offset + k.n].copy(), k.values, k.heat)
                      for k in self._kept if t0 < k.end <= t1]
            before_window = [k.values for k in self._kept if k.end <= t0]
            return Cut(t0, t1, pieces, latest_values(self._base + before_window))

    def stats(self) -> dict:
        wall = max(time.monotonic() - self.started, 1e-9)
        with self._lock:
            held = (self._kept[-1].end - self._kept[0].start) / self._rec.clock.ticks_per_second \
                if self._kept else 0.0
            return {"seconds": self.seconds, "interval": self.interval,
                    "effective_interval": self.effective_interval, "memory_cap": self.memory_cap,
                    "memory": self.nbytes, "peak_memory": self.peak_nbytes, "intervals": len(self._kept),
                    "held_seconds": held, "dropped_intervals": self.dropped_intervals,
                    "dropped_seconds": self.dropped_seconds, "collects": self.collects,
                    "collector_cpu_seconds": self.collector_cpu,
                    "collector_cpu_share": self.collector_cpu / wall}

    def window(self, cut: Cut, t0: Optional[int] = None) -> Snapshot:
        """The counters of the cut, from t0 (default: the cut's t0) to its
        t1, as `later - earlier` of two snapshots would give them, with
        exact extremes."""
        rec = self._rec
        clock = rec.clock
        pieces = cut.pieces
        if pieces:
            order = np.concatenate([p.index for p in pieces])
            before = np.concatenate([p.before for p in pieces])
            after = np.concatenate([p.after for p in pieces])
            idx, first = np.unique(order, return_index=True)
            last = len(order) - 1 - np.unique(order[::-1], return_index=True)[1]
            earlier_rows, later_rows = before[first], after[last]
            ext_idx, ext = fold_extremes(order, after[:, I0:I0 + NE])
        else:
            idx = np.zeros(0, dtype=np.int64)
            earlier_rows = later_rows = np.zeros((0, W), dtype=np.int64)
            ext_idx, ext = idx, np.zeros((0, NE), dtype=np.int64)
        values_later = latest_values([cut.values_before] + [p.values for p in pieces])
        exact = rec.extremes_frames(ext_idx, ext)
        seconds = clock.seconds(np.array([cut.t0 if t0 is None else t0, cut.t1]))
        empty_ext = np.zeros((len(idx), NE), dtype=np.int64)
        earlier = rec.snapshot_of(idx, earlier_rows, empty_ext, cut.values_before,
                                  {"end": float(seconds[0])}, H.empty())
        later = rec.snapshot_of(idx, later_rows, empty_ext, values_later,
                                {"end": float(seconds[1])}, H.empty(), lambda _a, _b: exact)
        snap = later - earlier
        heat = [H.from_fine(*p.heat) for p in pieces if len(p.heat[0])]
        heat = H.compact(pd.concat(heat, ignore_index=True)) if heat else H.empty()
        meta = dict(snap.meta, folded_files=0, trace_dropped=0)
        return dataclasses.replace(snap, _heat=heat, meta=meta)
