"""A continuous, bounded recording: every collect's per-file deltas, kept for
the last `seconds` within a memory cap, from which any window of that time
can be cut afterwards as an ordinary Snapshot.

A collector thread closes an interval every `interval` seconds (100 ms by
default) unless someone else collected more recently (a step marker, a
window): the hot path pays nothing beyond the counters it always keeps.
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
from tfdarshan.capture.recorder import I0, NE, W, Interval, Recorder, fold_extremes, latest_values
from tfdarshan.capture.snapshot import Snapshot

DEFAULT_INTERVAL = 0.1
DEFAULT_MEMORY = 64 << 20


@dataclasses.dataclass
class Kept:
    """One interval of the ring: (start, end] in ticks, and what changed."""
    start: int
    end: int
    interval: Interval
    nbytes: int


def _nbytes(iv: Interval) -> int:
    n = iv.index.nbytes + iv.before.nbytes + iv.after.nbytes + iv.heat[0].nbytes + iv.values.nbytes
    return n + 200      # the entry's own objects


class Ring:
    def __init__(self, recorder: Recorder, seconds: float, *, memory_cap: int = DEFAULT_MEMORY,
                 interval: float = DEFAULT_INTERVAL):
        if seconds <= 0 or interval <= 0 or memory_cap <= 0:
            raise ValueError("the ring needs positive seconds, interval and memory cap")
        self._rec = recorder
        self.seconds = float(seconds)
        self.interval = float(interval)
        self.memory_cap = int(memory_cap)
        self._kept: Deque[Kept] = collections.deque()
        self._lock = threading.Lock()
        self._last_end: Optional[int] = None
        # frequency rows as they were before the oldest kept interval (chunks, folded lazily)
        self._base: List[np.ndarray] = []
        self.nbytes = 0
        self.peak_nbytes = 0
        self.dropped_intervals = 0       # evicted by the cap while still inside `seconds`
        self.dropped_seconds = 0.0
        self.collector_cpu = 0.0         # CPU seconds of the collector thread
        self.collects = 0
        self.started = time.monotonic()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # ------------------------------------------------------------ running
    def start(self) -> "Ring":
        self._rec.attach()
        with self._rec._lock:
            self._rec.collect()          # the ring starts at an interval boundary
            self._base = [self._rec.values()]
            self._rec.add_listener(self._on_interval)
        self._thread = threading.Thread(target=self._run, name="tfdarshan-ring", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._rec.remove_listener(self._on_interval)

    def _run(self) -> None:
        ticks_per_second = self._rec.clock.ticks_per_second
        while not self._stop.is_set():
            last = self._last_end
            since = (_native.now_ticks() - last) / ticks_per_second if last is not None else self.interval
            if self._stop.wait(max(self.interval - since, 0.0)):
                break
            if self._last_end != last:
                continue                 # someone else collected meanwhile: wait from that one
            cpu = time.thread_time()
            try:
                self._rec.collect()
            except Exception:            # noqa: BLE001 - never let the collector break the job
                pass
            self.collector_cpu += time.thread_time() - cpu

    def _on_interval(self, iv: Interval) -> None:
        start = self._last_end if self._last_end is not None else iv.now_ticks
        self._last_end = iv.now_ticks
        self.collects += 1
        if len(iv.index) == 0 and not len(iv.heat[0]):
            self._expire(iv.now_ticks)
            return
        k = Kept(start, iv.now_ticks, iv, _nbytes(iv))
        self._expire(iv.now_ticks, room=k.nbytes)      # room first: the cap is never exceeded
        with self._lock:
            if k.nbytes <= self.memory_cap:
                self._kept.append(k)
                self.nbytes += k.nbytes
                self.peak_nbytes = max(self.peak_nbytes, self.nbytes)
            else:                        # one interval larger than the whole cap
                self.dropped_intervals += 1
                self.dropped_seconds += (k.end - k.start) / self._rec.clock.ticks_per_second

    def _expire(self, now: int, room: int = 0) -> None:
        hz = self._rec.clock.ticks_per_second
        horizon = now - int(self.seconds * hz)
        with self._lock:
            while self._kept and (self._kept[0].end <= horizon or self.nbytes + room > self.memory_cap):
                k = self._kept.popleft()
                self.nbytes -= k.nbytes
                self._base.append(k.interval.values)
                if sum(map(len, self._base[1:])) > max(len(self._base[0]), 1 << 16):
                    self._base = [latest_values(self._base)]
                if k.end > horizon:
                    self.dropped_intervals += 1
                    self.dropped_seconds += (k.end - k.start) / hz

    # ------------------------------------------------------------ reading
    def oldest_ticks(self) -> Optional[int]:
        with self._lock:
            return self._kept[0].start if self._kept else None

    def intervals(self, t0: int, t1: int) -> List[Kept]:
        """The kept intervals that closed in (t0, t1]."""
        with self._lock:
            return [k for k in self._kept if t0 < k.end <= t1]

    def stats(self) -> dict:
        wall = max(time.monotonic() - self.started, 1e-9)
        with self._lock:
            held = (self._kept[-1].end - self._kept[0].start) / self._rec.clock.ticks_per_second \
                if self._kept else 0.0
            return {"seconds": self.seconds, "interval": self.interval, "memory_cap": self.memory_cap,
                    "memory": self.nbytes, "peak_memory": self.peak_nbytes, "intervals": len(self._kept),
                    "held_seconds": held, "dropped_intervals": self.dropped_intervals,
                    "dropped_seconds": self.dropped_seconds, "collects": self.collects,
                    "collector_cpu_seconds": self.collector_cpu,
                    "collector_cpu_share": self.collector_cpu / wall}

    def window(self, kept: List[Kept], t0: int, t1: int) -> Snapshot:
        """The counters of (t0, t1] from its kept intervals, as `later - earlier`
        of two snapshots would give them, with exact extremes."""
        rec = self._rec
        clock = rec.clock
        ivs = [k.interval for k in kept]
        if ivs:
            order = np.concatenate([iv.index for iv in ivs])
            before = np.concatenate([iv.before for iv in ivs])
            after = np.concatenate([iv.after for iv in ivs])
            idx, first = np.unique(order, return_index=True)
            last = len(order) - 1 - np.unique(order[::-1], return_index=True)[1]
            earlier_rows, later_rows = before[first], after[last]
            ext_idx, ext = fold_extremes(order, after[:, I0:I0 + NE])
        else:
            idx = np.zeros(0, dtype=np.int64)
            earlier_rows = later_rows = np.zeros((0, W), dtype=np.int64)
            ext_idx, ext = idx, np.zeros((0, NE), dtype=np.int64)
        with self._lock:
            before_window = [k.interval.values for k in self._kept if k.end <= t0]
            values_earlier = latest_values(self._base + before_window)
        values_later = latest_values([values_earlier] + [iv.values for iv in ivs])
        exact = rec.extremes_frames(ext_idx, ext)
        seconds = clock.seconds(np.array([t0, t1]))
        empty_ext = np.zeros((len(idx), NE), dtype=np.int64)
        earlier = rec.snapshot_of(idx, earlier_rows, empty_ext, values_earlier,
                                  {"end": float(seconds[0])}, H.empty())
        later = rec.snapshot_of(idx, later_rows, empty_ext, values_later,
                                {"end": float(seconds[1])}, H.empty(), lambda _a, _b: exact)
        snap = later - earlier
        heat = [H.from_fine(*iv.heat) for iv in ivs if len(iv.heat[0])]
        heat = H.compact(pd.concat(heat, ignore_index=True)) if heat else H.empty()
        meta = dict(snap.meta, folded_files=0, trace_dropped=0)
        return dataclasses.replace(snap, _heat=heat, meta=meta)
