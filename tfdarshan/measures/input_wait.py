"""The one definition of input wait: the share of step time during which a
process had a file read or metadata call (open, stat, seek, close) of its
input in flight. The tab (verdict, cards, rank views), `analyze`'s tables,
`recommend`'s findings, its job-time predictions and `--compare` all call
these functions and take their labels from here, so two views of one
session cannot disagree.

Per process and step, the wait is wall time: the time any of its threads
was inside such a call (the step series' io_wall column, the union of the
calls' intervals). tf.data reads on several threads at once, so the time
in calls summed over threads can exceed the step; wall time cannot. A
series without that column (written before it existed, imported, or
retimed) falls back to the summed time capped at the step's length, an
upper bound. Over several steps or processes (ranks), the share is the sum
of their waits over the sum of their lengths: the job's input wait is that
over every rank's counted steps, each rank's own over its own. Counted
steps are training steps (not the set-up, the wind-down, nor a window
without markers) that the window's end did not cut short.

Three figures, each named for what it is, in every table and payload:
the job's input wait (JOB: a share, over every rank's counted steps), a
rank's own (the ranks table's RANK_SHARE column: a share, over its own
steps, beside the seconds it sums, WAIT_TIME over STEP_TIME), and one
step's of one process (the steps table's WAIT_TIME column, and of_series'
`wait`: seconds, from step_wait_time)."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from tfdarshan.measures.human import percent
# the step series' columns the measure reads (steps/series.py names them from here):
# optional (older series lack it): the step the window's end cut short, whose
# duration may include profiler shutdown
CUT_COLUMN = "cut_by_window_end"
# optional (older series, imported logs and retimed ones lack it): seconds of
# the step during which a read or metadata call was in flight on any thread,
# the union of the calls' intervals (native/busy.c); never more than the
# step, however many threads read at once
IO_WALL_COLUMN = "io_wall"
# the columns of the analysis tables: a rank's share (ranks), and seconds of
# input wait (ranks: summed over its counted steps; steps: one step's) with
# the step time they are over
RANK_SHARE, WAIT_TIME, STEP_TIME = "input_wait_share", "input_wait_time", "step_time"

LABEL = "share of step time with a file read or metadata call in flight"
# how a step's wait was measured: which bound the figure rests on
WALL = "wall time, on any thread"
CAPPED = "time in calls summed over threads, capped at the step's length"
BOTH = "wall time on any thread; where a series lacks it, summed time capped at the step's length"
JOB = "Job input wait"
PER_RANK = "per-rank input wait (each rank's own steps)"
ONE_OF = "Input wait of this process (its own steps)"      # one process of a session of several, alone
SUM_OVER_RANKS, MEAN_OVER_RANKS = "summed over ranks", "mean over ranks"
SUM_OVER_PROCESSES, MEAN_OVER_PROCESSES = "summed over processes", "mean over processes"


def step_wait_time(read_time, meta_time, duration, io_wall=None) -> np.ndarray:
    """Seconds of input wait of each (process, step): the wall time with a
    read or metadata call in flight where io_wall holds it (not NaN), else
    the time in those calls summed over threads; never more than the step."""
    d = np.clip(np.asarray(duration, dtype=np.float64), 0.0, None)
    summed = np.asarray(read_time, dtype=np.float64) + np.asarray(meta_time, dtype=np.float64)
    if io_wall is not None:
        wall = np.asarray(io_wall, dtype=np.float64)
        summed = np.where(np.isnan(wall), summed, np.minimum(wall, summed))
    return np.minimum(summed, d)


def bound_of(steps: pd.DataFrame) -> str:
    """Which measure a series' waits rest on (WALL, CAPPED or BOTH)."""
    if IO_WALL_COLUMN not in steps or not len(steps):
        return CAPPED
    have = steps[IO_WALL_COLUMN].notna()
    return WALL if have.all() else CAPPED if not have.any() else BOTH


def job_label(ranks: int, bound: str = BOTH) -> str:
    """What the job's input wait is, in the words analyze, recommend and the tab print."""
    over = f"all {ranks} ranks' steps" if ranks > 1 else "its steps"
    return f"{LABEL}, over {over}; {bound}"


def job_line(share: Optional[float], ranks: int, bound: str = BOTH) -> str:
    """The one line that states the job's input wait."""
    figure = f"{percent(share)} of step time" if share is not None else "unknown (no training steps)"
    return f"{JOB}: {figure} ({job_label(ranks, bound)})"


def counted(step, cut=None) -> np.ndarray:
    """Which entries count towards the share: training steps not cut short."""
    keep = np.asarray(step) >= 0
    return keep if cut is None else keep & ~np.asarray(cut, dtype=bool)


def share(wait_seconds: float, step_seconds: float) -> Optional[float]:
    """Waits over step time; None without step time."""
    return float(wait_seconds) / float(step_seconds) if step_seconds > 0 else None


def of_series(steps: pd.DataFrame) -> pd.DataFrame:
    """A step series (one or several processes' rows: step, start, end,
    read_time, meta_time, cut_by_window_end) with each row's `duration`,
    capped `wait` and whether it is `counted`."""
    if steps.empty or "start" not in steps:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in
                             (("step", "int64"), ("duration", "float64"), ("wait", "float64"), ("counted", bool))})
    duration = (steps["end"] - steps["start"]).clip(lower=0).to_numpy(np.float64)
    cut = steps[CUT_COLUMN].to_numpy(bool) if CUT_COLUMN in steps else None
    wall = steps[IO_WALL_COLUMN] if IO_WALL_COLUMN in steps else None
    return steps.assign(duration=duration, wait=step_wait_time(steps["read_time"], steps["meta_time"], duration, wall),
                        counted=counted(steps["step"], cut))


def series_share(steps: pd.DataFrame) -> Optional[float]:
    """The share over a step series' counted rows (every process's)."""
    c = of_series(steps)
    c = c[c["counted"]]
    return share(c["wait"].sum(), c["duration"].sum())


def per_step(cells: pd.DataFrame, processes: int) -> pd.DataFrame:
    """Per training step (of_series rows, or analysis step rows with
    `duration` and `wait`): the mean over `processes` of its length and of
    its wait (the sum over processes divided by their number, so that the
    bars' totals give the share), and whether any process's was cut."""
    real = cells[cells["step"] >= 0]
    g = real.groupby("step", as_index=False).agg(duration=("duration", "sum"), wait=("wait", "sum"),
                                                   counted=("counted", "all"))
    n = max(int(processes), 1)
    g["duration"] /= n
    g["wait"] /= n
    return g


def critical_path(cells: pd.DataFrame) -> pd.DataFrame:
    """Per counted step, the slowest process's length (a synchronous step
    waits for it) and that process's wait."""
    c = cells[cells["counted"]]
    if c.empty:
        return pd.DataFrame({"step": pd.Series(dtype="int64"), "duration": pd.Series(dtype="float64"),
                             "wait": pd.Series(dtype="float64")})
    worst = c.loc[c.groupby("step")["duration"].idxmax()]
    return worst[["step", "duration", "wait"]].reset_index(drop=True)
