"""The I/O flight recorder: for the job that is slow at 3 a.m. when nobody
is profiling. It keeps the last N seconds of per-file I/O in a bounded ring
(capture/ring.py) and writes an ordinary session (Darshan log, step series;
no XPlane) when

  - a step takes longer than `slow_factor` times the median of the recent
    steps (after `warmup_steps` steps): the dump covers that step and the
    seconds before it;
  - the process gets SIGUSR2;
  - Python asks (`FlightRecorder.dump()`).

A step is judged net of the recorder's own work: a dump (cutting the ring,
writing the log and tables) takes the GIL and a core for 0.1-0.5 s, which
stalls the training step it lands in, so the time a dump was under way
during a step is taken out of the step's time before it is compared (at
most what the dump can have cost it: a step found slow that way is slow by
itself), and such a step is left out of the median. The collects the
recorder makes at a step's end are left out of the next step's time too.
The last judgments are kept (`judgments`: step, time, the dump time taken
out, the median, slow or not).

Automatic dumps (slow steps) are rate-limited: at most one every `min_gap`
seconds and `max_dumps` in all, so a sick job does not fill the disk; the
triggers left out are counted and named in the next dump. An operator's
request (SIGUSR2, `dump()`) is never dropped: it has a gap of its own,
OPERATOR_GAP, and a request inside it waits out the rest of the gap (signals
that come meanwhile are served by that one dump: it covers them all). A
dump that cannot be written says so in one line on stderr.

Steps are the same markers the step series uses (Keras batches,
Trace(step_num=...), tfdarshan.step). Step ends close an interval when the
last one is at least an interval old, so a step's I/O is exact to within
one interval (100 ms, longer while collecting is costly: see capture/ring.py):
steps shorter than that share intervals, and an interval's I/O goes to the
step in which it closed."""
from __future__ import annotations

import atexit
import collections
import contextlib
import logging
import os
import pathlib
import queue
import signal
import statistics
import sys
import threading
import time
from typing import Deque, Dict, List, NamedTuple, Optional

import numpy as np

from tfdarshan.capture import _native, live
from tfdarshan.capture.recorder import RECORDER
from tfdarshan.capture.ring import DEFAULT_INTERVAL, DEFAULT_MEMORY, Ring
from tfdarshan.logs.logdir import session_root
from tfdarshan.tf import session as session_mod, steps as S

logger = logging.getLogger("tfdarshan")

SLOW_STEP, SIGNAL, ON_DEMAND = "slow step", "signal", "on demand"
SOURCE = "flight recorder"
MEDIAN_OF = 200            # the running median is over this many recent steps
POLL = 0.25                # how often the writer looks for a signal that came in
# between two operator dumps: a dump cuts the ring and writes a log and two
# tables (0.1-0.5 s of one core), so a signal storm costs at most about half
# a core; dumps closer than this would cover nearly the same seconds
OPERATOR_GAP = 1.0


class Judgment(NamedTuple):
    """One step compared against the median: slow when seconds - own > slow_factor x median."""
    step: int
    seconds: float          # from its begin (else the last step's end) to its end
    own: float              # of which a dump of the recorder's was under way
    median: float
    slow: bool


class FlightRecorder:
    def __init__(self, logdir, seconds: float = 120.0, *, slow_factor: float = 3.0, warmup_steps: int = 20,
                 min_gap: float = 300.0, max_dumps: int = 10, memory_cap: int = DEFAULT_MEMORY,
                 interval: float = DEFAULT_INTERVAL, on_signal: bool = True):
        if seconds <= 0 or slow_factor <= 1 or warmup_steps < 1 or min_gap < 0 or max_dumps < 0:
            raise ValueError("flight recorder: need seconds > 0, slow_factor > 1, warmup_steps >= 1, "
                             "min_gap >= 0 and max_dumps >= 0")
        self.logdir = pathlib.Path(logdir)
        self.seconds = float(seconds)
        self.slow_factor, self.warmup_steps = float(slow_factor), int(warmup_steps)
        self.min_gap, self.max_dumps = float(min_gap), int(max_dumps)
        # a slow step longer than `seconds` is still covered from its start, within reason
        self.ring = Ring(RECORDER, self.seconds * 2, memory_cap=memory_cap, interval=interval)
        self.on_signal = on_signal
        self.dumps: List[pathlib.Path] = []
        self.suppressed: Dict[str, int] = collections.Counter()
        self._since_last: Dict[str, int] = collections.Counter()
        self._durations: Deque[float] = collections.deque(maxlen=MEDIAN_OF)
        self._steps: Deque[tuple] = collections.deque()     # (step, start, end) ticks, recent
        self._begun: Dict[int, int] = {}
        self._last_end: Optional[int] = None
        self._judge_from: Optional[int] = None      # the last step's end, after the recorder's work there
        # the recorder's own work: [start, end] ticks of dumps being cut or written
        # (any thread; end None while under way), kept until no step to judge can overlap them
        self._work: List[list] = []
        self._pending = 0               # slow steps' requests not yet written
        self.judgments: Deque[Judgment] = collections.deque(maxlen=MEDIAN_OF)
        self._last_dump_at: Optional[float] = None
        self._auto_dumps = 0
        self._lock = threading.Lock()
        self._requests: "queue.Queue" = queue.Queue()
        self._signals = 0               # SIGUSR2s received (written by the handler only)
        self._signals_served = 0        # ... of them covered by a dump (the writer only)
        self._operator_lock = threading.Lock()
        self._last_operator_at: Optional[float] = None
        self._previous_handler = None
        self._stopping = threading.Event()
        self._writer: Optional[threading.Thread] = None
        self._live = None               # this recorder's live log, when it started one
        self._attached_here = False     # the shim was attached by this recorder's start

    # ------------------------------------------------------------ running
    def start(self) -> "FlightRecorder":
        self._attached_here = not RECORDER.attached
        self.ring.start()
        self._hz = RECORDER.clock.ticks_per_second
        if live.current() is None:      # (`tfdarshan run` keeps one in its own run directory)
            self._live_dir = session_root(self.logdir, beside_xprof=False) / \
                f"{session_mod.run_directory_name()}_flight_{os.getpid()}"
            self._live = session_mod.start_live_log(self._live_dir, SOURCE)
        S.observers.append(self._on_step)
        if self.on_signal and threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGUSR2)
            if previous is not signal.SIG_IGN:
                self._previous_handler = previous
                signal.signal(signal.SIGUSR2, self._on_sigusr2)
        self._writer = threading.Thread(target=self._write_loop, name="tfdarshan-flight-recorder", daemon=True)
        self._writer.start()
        atexit.register(self.stop)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """Stop recording (and detach the shim if start() attached it); dumps
        already asked for are written first."""
        if self._stopping.is_set():
            return
        if self._on_step in S.observers:
            S.observers.remove(self._on_step)
        if signal.getsignal(signal.SIGUSR2) == self._on_sigusr2 and \
                threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGUSR2, self._previous_handler or signal.SIG_DFL)
        self._requests.put(None)
        if self._writer is not None:
            self._writer.join(timeout)
        self._stopping.set()
        self.ring.stop()
        if self._live is not None:
            live.stop(self._live)
            self._live = None
            try:
                self._live_dir.rmdir()
            except OSError:
                pass
        if self._attached_here:         # stopped recording means no wrapper left on the hot path
            RECORDER.detach()

    def stats(self) -> dict:
        return {**self.ring.stats(), "dumps": [str(d) for d in self.dumps],
                "suppressed": dict(self.suppressed), "signals": self._signals,
                "dumping": self._dumping(), "steps_judged": len(self.judgments)}

    def busy(self) -> bool:
        """Whether a dump is being cut or written, or waits for the writer
        (a slow step's request, a signal not yet served)."""
        with self._lock:
            return any(w[1] is None for w in self._work) or self._pending > 0 or \
                self._signals != self._signals_served

    def _dumping(self) -> int:
        """Dumps being cut or written now."""
        with self._lock:
            return sum(w[1] is None for w in self._work)

    @contextlib.contextmanager
    def _own_work(self):
        """Marks the recorder's own work (a dump): taken out of the steps it overlaps."""
        span = [_native.now_ticks(), None]
        with self._lock:
            # (spans a step can no longer overlap go at each step's end; without steps, here)
            horizon = span[0] - int(self.ring.seconds * self._hz)
            self._work = [w for w in self._work if w[1] is None or w[1] >= horizon]
            self._work.append(span)
        try:
            yield
        finally:
            with self._lock:
                span[1] = _native.now_ticks()

    def _work_within(self, start: int, end: int) -> int:
        """Ticks of [start, end] during which a dump was under way (the
        union of the spans), and forget the spans that ended before `end`."""
        with self._lock:
            spans = sorted((max(a, start), min(end if b is None else b, end)) for a, b in self._work)
            self._work = [w for w in self._work if w[1] is None or w[1] >= end]
        total, reach = 0, start
        for a, b in spans:
            a = max(a, reach)
            if b > a:
                total += b - a
                reach = b
        return total

    # -------------------------------------------------------------- steps
    def _on_step(self, event: str, step: int) -> None:
        now = _native.now_ticks()
        if event == "begin":
            self._begun = {step: now}
            return
        began = self._begun.pop(step, None)
        start = self._last_end if self._last_end is not None else began
        self._last_end = now
        # without a begin marker, a step runs from the last one's end, after
        # what the recorder did there (a collect, a slow step's cut)
        ref = began if began is not None else self._judge_from if self._judge_from is not None else start
        duration = (now - ref) / self._hz if ref is not None else 0.0
        with self._lock:
            self._steps.append((step, start if start is not None else now, now))
            horizon = now - int(self.ring.seconds * self._hz)
            while self._steps and self._steps[0][2] < horizon:
                self._steps.popleft()
        own = self._work_within(ref, now) / self._hz if ref is not None else 0.0
        net = duration - own
        slow = None
        if len(self._durations) >= self.warmup_steps:
            median = statistics.median(self._durations)
            slow = median if median > 0 and net > self.slow_factor * median else None
            self.judgments.append(Judgment(step, duration, own, median, slow is not None))
        if not own:
            self._durations.append(duration)    # (a step a dump stalled would skew the median)
        if slow is not None:
            took = f"took {_seconds(duration)}" + (f" ({_seconds(net)} net of the recorder's dump)" if own else "")
            self._trigger(SLOW_STEP, f"step {step} {took}, {net / slow:.1f}\u00d7 the median ({_seconds(slow)})",
                          start=began if began is not None else start, step=step)
        elif (now - (self.ring._last_end or 0)) / self._hz >= self.ring.effective_interval:
            RECORDER.collect()          # step ends as interval boundaries, at most one per interval
        self._judge_from = _native.now_ticks()

    # ------------------------------------------------------------ triggers
    def _on_sigusr2(self, signum, frame) -> None:
        # no locks here: the handler runs between bytecodes of whatever the
        # main thread was doing, possibly inside this module; the writer polls.
        # A nested signal may lose one count here, never the request
        self._signals += 1
        prev = self._previous_handler
        if callable(prev):
            prev(signum, frame)

    def _allowed(self, kind: str) -> bool:
        """The rate limit of automatic dumps; counts what it leaves out."""
        with self._lock:
            now = time.monotonic()
            if self._auto_dumps >= self.max_dumps or \
                    (self._last_dump_at is not None and now - self._last_dump_at < self.min_gap):
                self.suppressed[kind] += 1
                self._since_last[kind] += 1
                return False
            self._auto_dumps += 1
            self._last_dump_at = now
            return True

    def _trigger(self, kind: str, reason: str, *, start: Optional[int] = None, step: Optional[int] = None) -> None:
        if not self._allowed(kind):
            return
        with RECORDER._lock:
            RECORDER.collect()          # the window ends here, on an interval boundary
            end = self.ring._last_end
        with self._lock:
            self._pending += 1
        self._requests.put((kind, reason, start, end, step))

    def dump(self, reason: str = "asked from Python") -> Optional[pathlib.Path]:
        """Write the last `seconds` now (within OPERATOR_GAP of the previous
        operator dump: once the gap has passed); the session directory."""
        end = self._operator_cut()
        with self._own_work():
            return self._write(ON_DEMAND, reason, None, end, None)

    def _operator_cut(self) -> int:
        """Wait out the operator gap, then close an interval: the dump's end."""
        with self._operator_lock:
            if self._last_operator_at is not None:
                wait = OPERATOR_GAP - (time.monotonic() - self._last_operator_at)
                if wait > 0:
                    time.sleep(wait)
            with self._own_work(), RECORDER._lock:
                RECORDER.collect()
                end = self.ring._last_end
            self._last_operator_at = time.monotonic()
            return end

    def _serve_signals(self) -> None:
        seen = self._signals
        if seen == self._signals_served:
            return
        end = self._operator_cut()       # covers every signal counted in `seen`
        merged = seen - self._signals_served
        reason = f"SIGUSR2 received by pid {os.getpid()}" + (f" ({merged} signals, one dump)" if merged > 1 else "")
        try:
            self._safely(SIGNAL, reason, None, end, None)
        finally:
            self._signals_served = seen     # (once written: busy() until then)

    def _write_loop(self) -> None:
        while True:
            try:
                req = self._requests.get(timeout=POLL)
            except queue.Empty:
                req = ()
            self._serve_signals()
            if req is None:
                return
            if req:
                try:
                    self._safely(*req)
                finally:
                    with self._lock:
                        self._pending -= 1

    def _safely(self, kind: str, *req) -> None:
        try:
            with self._own_work():      # (what the dump frees on its way out included)
                self._write(kind, *req)
        except Exception as e:          # noqa: BLE001 - the job goes on without its dump
            print(f"tfdarshan: the flight recorder could not write a dump ({kind}): "
                  f"{str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)

    # -------------------------------------------------------------- dumps
    def _write(self, kind: str, reason: str, start: Optional[int], end: int,
               step: Optional[int]) -> Optional[pathlib.Path]:
        hz = self._hz
        t0 = end - int(self.seconds * hz)
        if start is not None:
            t0 = min(t0, start - 1)
        cut = self.ring.cut(t0, end)
        first = cut.pieces[0].start if cut.pieces else end
        snap = self.ring.window(cut, first)
        with self._lock:
            marks = [m for m in self._steps if first < m[2] <= end]
            since, self._since_last = dict(self._since_last), collections.Counter()
        steps_df, files_df = S.frames(_step_entries(cut.pieces, marks, first, end), RECORDER._ids, hz, first)
        held = (end - first) / hz
        wanted = (end - t0) / hz
        meta = {"trigger": kind, "reason": reason, "window_seconds": f"{held:.3f}"}
        if step is not None:
            meta["slow_step"] = str(step)
        if held + self.ring.interval < wanted:
            why = ("the ring's memory cap dropped the rest" if self.ring.dropped_intervals
                   else "the recorder started then")
            meta["window_note"] = f"covers the last {held:.1f} s of the {wanted:.1f} s asked for: {why}"
        if since:
            meta["suppressed_before"] = ", ".join(f"{n} {k}" for k, n in sorted(since.items()))
        with self._lock:
            n = len(self.dumps) + 1
        # named by when it was dumped (the window's end), not by its start, which
        # is the recorder's start as long as the ring holds everything since then
        wall = time.time() - (_native.now_ticks() - end) / hz
        run_dir = session_root(self.logdir, beside_xprof=False) / \
            f"{session_mod.run_directory_name(wall)}_flight_{os.getpid()}_{n}"
        session = session_mod.ProfileSession.of_window(RECORDER, snap, steps_df, files_df, label=SOURCE)
        run_dir = session_mod.write_or_fall_back(session, run_dir, metadata=meta)["darshan"].parent
        with self._lock:
            self.dumps.append(run_dir)
        logger.warning("tfdarshan: flight recorder (%s: %s) wrote %s", kind, reason, run_dir)
        return run_dir


def _step_entries(pieces, marks, first: int, end: int) -> List[dict]:
    """Step entries for the series: each interval goes to the first step
    that ended at or after it closed; what closed after the last step's end
    goes to that step (its end moves to the window's end)."""
    if not marks:
        rows = [S.step_rows(p.index, p.before, p.after) for p in pieces]
        return [{"step": S.WINDOW_STEP, "start": first, "end": end, "rows": rows}]
    ends = np.array([m[2] for m in marks])
    entries = [{"step": step, "start": max(s, first), "end": e, "rows": []} for step, s, e in marks]
    for p in pieces:
        i = min(int(np.searchsorted(ends, p.end, side="left")), len(entries) - 1)
        entries[i]["rows"].append(S.step_rows(p.index, p.before, p.after))
    entries[-1]["end"] = max(entries[-1]["end"], end)
    return entries


def _seconds(s: float) -> str:
    return f"{s * 1e3:.0f} ms" if s < 1 else f"{s:.1f} s"


_current: Optional[FlightRecorder] = None
_current_lock = threading.Lock()


def start(logdir=None, seconds: Optional[float] = None, **policy) -> FlightRecorder:
    """The process's flight recorder: started with these settings, or the
    one already running (`tfdarshan run --flight-recorder`, an earlier call),
    whose settings stay."""
    global _current
    with _current_lock:
        if _current is not None and not _current._stopping.is_set():
            if logdir is not None or seconds is not None or policy:
                logger.warning("tfdarshan: a flight recorder is already running (last %.0f s into %s); "
                            "using it, not the new settings", _current.seconds, _current.logdir)
            return _current
        _current = FlightRecorder(logdir or "tfdarshan_logs", 120.0 if seconds is None else seconds,
                                  **policy).start()
        return _current
