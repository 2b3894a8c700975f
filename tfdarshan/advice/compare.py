"""Did staging pay? A run before staging against a run after it: what the
user waits for first (the job's time by job_time.py's rule, beside the
plan's predicted job-time saving and their ratio; step time, and the
training's and the window's length), then the staged files' input I/O
time (time_in_calls.input_io_time: reads and metadata calls), which is
summed over threads and ranks and so can exceed the wall time it
overlaps."""
from __future__ import annotations

from typing import Dict, Optional

import numpy as np
import pandas as pd

from tfdarshan.advice import job_time
from tfdarshan.capture import served as SV
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.measures import input_wait
from tfdarshan.measures.bandwidth import bandwidth
from tfdarshan.measures.time_in_calls import input_io_time, parts_of


def compare_runs(before: Snapshot, after: Snapshot, mapping: Dict[str, str],
                 predicted: Optional[float]) -> Dict:
    """Predicted against achieved: the staged files' input I/O time in the run
    before (at their sources) and after (at their copies: read by their own
    paths, or served in place of their sources by the shim, when every open
    of them was)."""
    def input_time(snap, paths):
        p = snap.posix[snap.posix["path"].isin(paths)]
        return float(input_io_time(parts_of(p, "POSIX")).sum()), int(p["POSIX_BYTES_READ"].sum())

    def read_bandwidth(snap):
        p = snap.posix[snap.posix["POSIX_READS"] > 0]
        bw = bandwidth(p["POSIX_BYTES_READ"].sum(), p["POSIX_F_READ_TIME"].sum())
        return bw if bw == bw else 0.0          # no read time: 0, as the report prints it

    def read_in(snap, paths):
        p = snap.posix[snap.posix["path"].isin(paths) & (snap.posix["POSIX_BYTES_READ"] > 0)]
        return int(p["path"].nunique())

    served = SV.frame(after.meta.get("served"))
    served_throughout = set(served.loc[served["throughout"], "path"]) & set(mapping)
    copies = set(mapping.values())
    t_before, b_before = input_time(before, set(mapping))
    t_after, b_after = input_time(after, copies | served_throughout)
    achieved = t_before - t_after
    predicted = float(predicted) if predicted is not None else None
    return {"staged_files": len(mapping), "before_time": t_before, "after_time": t_after,
            "bytes_before": b_before, "bytes_after": b_after,
            "copies_read": read_in(after, copies) + read_in(after, served_throughout),
            "sources_read": read_in(after, set(mapping) - served_throughout),
            "served": SV.summary(after.meta.get("served")),
            "predicted_saving": predicted, "achieved_saving": achieved,
            "achieved_over_predicted": achieved / predicted if predicted else None,
            # read bandwidth (bytes read / time in reads) of every file read
            "bandwidth_before": read_bandwidth(before), "bandwidth_after": read_bandwidth(after)}


def wall_times(snap: Snapshot, steps: Optional[pd.DataFrame]) -> Dict:
    """A run's lengths: its training steps (per step the slowest process, as
    a synchronous job waits for it: median step, their sum, their count) and
    its window; step figures are None without step markers."""
    cells = input_wait.of_series(steps if steps is not None else pd.DataFrame())
    crit = input_wait.critical_path(cells)
    d = crit["duration"].to_numpy(np.float64)
    return {"steps": int(len(d)), "step_time": float(np.median(d)) if len(d) else None,
            "training_time": float(d.sum()) if len(d) else None, "window_time": float(snap.end - snap.start)}


def compare_wall(before: Dict, after: Dict) -> Dict:
    """Each length before and after, with its change as a fraction (None where either is unknown)."""
    out = {}
    for k in ("step_time", "training_time", "window_time"):
        b, a = before.get(k), after.get(k)
        out[k] = {"before": b, "after": a, "change": (a - b) / b if b and a is not None else None}
    out["steps"] = {"before": before.get("steps"), "after": after.get("steps")}
    return out


def compare_job(steps_before: Optional[pd.DataFrame], steps_after: Optional[pd.DataFrame],
                predicted: Optional[float], mode: Optional[str] = None, shared_cores=()) -> Dict:
    """The job time before and after by job_time.py's rule (the plan's mode,
    else BEFORE's, for both runs), the saving achieved, the one predicted
    and their ratio; shared_cores: the plan's nodes with more ranks than
    cores (job_time.shared_cores), where the prediction may be optimistic."""
    empty = pd.DataFrame()
    b = job_time.measured(steps_before if steps_before is not None else empty, mode)
    a = job_time.measured(steps_after if steps_after is not None else empty, b["mode"])
    achieved = b["job_time"] - a["job_time"] if b["job_time"] is not None and a["job_time"] is not None else None
    predicted = float(predicted) if predicted is not None else None
    return {"mode": b["mode"], "before": b["job_time"], "after": a["job_time"], "achieved": achieved,
            "predicted": predicted,
            "ratio": achieved / predicted if achieved is not None and predicted else None,
            "shared_cores": list(shared_cores or [])}


def served_label(s: Dict) -> str:
    """What serving staged copies did, in one line (SV.summary's figures):
    "served from /dev/shm: 160 opens, 1.0 GiB"; files partly served and
    fallbacks to the source after an error on a copy are named after it."""
    from tfdarshan.measures.human import human_bytes
    if not s.get("opens") and not s.get("stats"):
        why = ", ".join(f"{n} {reason}" for reason, n in (s.get("not_served") or {}).items())
        return "served from staged copies: none" + (f" ({why})" if why else "")
    line = f"served from {s['served_from']}: {s['opens']:,} opens, {human_bytes(s['bytes'])}"
    extra = []
    if s["stats"]:
        extra.append(f"{s['stats']:,} stats")
    if s["files_partly"]:
        extra.append(f"{s['files_partly']} files partly (opened from their sources too: their bytes not counted)")
    if s["fallbacks"]:
        extra.append(f"{s['fallbacks']} calls fell back to the source after an error on the copy")
    not_served = ", ".join(f"{n} {reason}" for reason, n in s["not_served"].items())
    if not_served:
        extra.append(f"not served: {not_served}")
    return line + (f" ({'; '.join(extra)})" if extra else "")
