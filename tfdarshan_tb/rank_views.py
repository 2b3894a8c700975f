"""The tab's payloads for a many-rank session, from its analysis tables
(rank_data.RankSessionData): the views every session has, as far as the
tables hold them, and the rank views (a ranks x steps heatmap of input wait,
the ranks sorted by wait) with a host / rank filter. Pure functions."""
from __future__ import annotations

import math
import re
from typing import Dict, Optional

import numpy as np
import pandas as pd

from tfdarshan.capture import kernel_io as K
from tfdarshan.capture import mounts as M
from tfdarshan.measures import input_wait
from tfdarshan.measures import time_in_calls as T
from tfdarshan_tb import views
from tfdarshan_tb.rank_data import RankSessionData

FILE_COLUMNS = ["path", "mount", "kind", "ranks", "bytes_read", "bytes_written", "opens", *T.PARTS, T.FILE_TIME,
                "bytes_min", "bytes_median", "bytes_max", f"{T.FILE_TIME}_max",
                # beyond Darshan's counters, summed over ranks (kernel_io.py)
                "how", "copy_bytes_read", "copy_bytes_written", "mmap_bytes"]
# a heatmap larger than this is drawn with steps binned (the browser draws every cell)
MAX_HEAT_CELLS = 250_000
RANK_SPEC = re.compile(r"\d{1,9}(-\d{1,9})?(,\d{1,9}(-\d{1,9})?)*")


def _clean_list(values) -> list:
    return [views._clean(v) for v in values]


def _real_steps(d: RankSessionData) -> pd.DataFrame:
    """Training steps (not the set-up, the wind-down nor a window without
    markers), with input_wait.py's `wait` (seconds) and `counted` columns."""
    st = d.steps[d.steps["step"] >= 0]
    return st.assign(wait=st[input_wait.WAIT_TIME])


def job_share(d: RankSessionData) -> Optional[float]:
    """The job's input wait: every rank's counted waits over their step time."""
    return input_wait.share(d.ranks[input_wait.WAIT_TIME].sum(), d.ranks[input_wait.STEP_TIME].sum())


def summary(d: RankSessionData) -> Dict:
    r = d.ranks
    read, written = int(r["bytes_read"].sum()), int(r["bytes_written"].sum())
    st = _real_steps(d)
    out = {"files": int(len(d.files)), "bytes_read": read, "bytes_written": written,
           **views.time_figures({part: float(r[part].sum()) for part in T.PARTS}, read, written), "duration": None,
           "processes": int(len(r)), "ranks": int(len(r)), "hosts": int(r["host"].nunique()),
           "steps": int(st["step"].nunique()), "input_share": job_share(d),
           "setup_time": float(r["setup_time"].max()) if r["setup_time"].notna().any() else None,
           "setup_bytes": int(r["setup_bytes"].sum()),
           "folded_files": 0, "trace_dropped": 0,
           # beyond Darshan's counters, as a one-process session shows them
           "copy_bytes": K.copied_bytes_of_table(d.files),      # each copy once
           **(views.mapped_bytes(d.files["path"], d.files["mmap_bytes"]) if len(d.files)
              else {"mmap_bytes": 0, "runtime_mmap_bytes": 0})}
    out = {k: views._clean(v) for k, v in out.items()}
    out["labels"] = views.time_labels(input_wait.SUM_OVER_RANKS)
    out["input_label"] = views.input_label(len(r)).replace("processes", "ranks")
    out["origin"] = views.origin(d.job_metadata)
    out["skipped_logs"] = d.skipped_logs
    out["partial_logs"] = d.partial_logs
    out["coverage"] = d.coverage
    out["served"] = views.served_note(d.served)
    return out


def verdict(d: RankSessionData, width: Optional[int] = None) -> Dict:
    """Per step, the mean over ranks of its duration and of its file I/O;
    the share is the job's (job_share), which the bars' totals give."""
    st = _real_steps(d)
    n = len(d.ranks)
    out = {"series": True, "steps": [], "share": None, "xprof": None, "over": input_wait.MEAN_OVER_RANKS,
           "label": views.input_label(n).replace("processes", "ranks"), "name": input_wait.JOB}
    g = input_wait.per_step(st, n)
    if not len(g):
        return out
    out.update(steps=[int(s) for s in g["step"]], duration=_clean_list(g["duration"]),
               file_io=_clean_list(g["wait"]), other_input=None,
               compute=_clean_list((g["duration"] - g["wait"]).clip(lower=0)),
               cut_by_window_end=(~g["counted"].to_numpy(bool)).tolist(), share=views._clean(job_share(d)))
    return views.cut_to_width(out, width, views.VERDICT_SERIES, ["cut_by_window_end"])


def steps(d: RankSessionData, width: Optional[int] = None) -> Dict:
    """Per step, summed over ranks: bytes, time in calls and bandwidth
    (views.step_figures, as one process's chart has them); the duration is
    the mean over ranks. Cut to `width` buckets when longer."""
    st = _real_steps(d)
    if st.empty:
        return {"steps": [], "mounts": {}, "downsampled": None}
    g = st.groupby("step", as_index=False).agg(bytes_read=("bytes_read", "sum"),
                                                bytes_written=("bytes_written", "sum"),
                                                **{part: (part, "sum") for part in T.PARTS},
                                                duration=("duration", "mean"))
    n = len(g)
    out = {"steps": [int(s) for s in g["step"]], "duration": _clean_list(g["duration"]),
           "over": input_wait.SUM_OVER_RANKS,
           "cut_by_window_end": [False] * n, "bytes_read": [int(b) for b in g["bytes_read"]],
           "bytes_written": [int(b) for b in g["bytes_written"]], "ops": [None] * n, **views.step_figures(g),
           "mounts": {}}
    return views.cut_to_width(out, width, views.STEP_SERIES, ["cut_by_window_end"], nested="mounts")


def histograms(d: RankSessionData) -> Dict:
    """Access sizes are not in the tables: an empty histogram, left out of the page."""
    return {"bins": views.SIZE_BINS, "labels": views.SIZE_LABELS, "read": [], "write": [], "available": False}


def timeline(d: RankSessionData) -> Dict:
    return {"available": False, "files": []}


def mounts(d: RankSessionData, offset: int = 0, limit: Optional[int] = None) -> Dict:
    t = d.mounts_table
    t = t[t["mount"] != M.STREAMS]            # not storage: the file table lists them
    if t.empty:
        return {"mounts": [], "total": 0, "offset": offset}
    names = views.mount_names(M.label(p, d.mounts) if p else "?" for p in t["mount"])
    g = t.assign(mount=names).groupby("mount", as_index=False).agg(
        files=("files", "sum"), bytes_read=("bytes_read", "sum"), bytes_written=("bytes_written", "sum"),
        **{part: (part, "sum") for part in T.PARTS})
    g = views.with_bandwidth(g)
    return {**views.page_of(g.to_dict("records"), offset, limit, "mounts"), "over": input_wait.SUM_OVER_RANKS}


def files(d: RankSessionData, sort: Optional[str] = None, order: str = "desc", offset: int = 0,
          limit: int = 50, query: str = "", step: Optional[int] = None) -> Dict:
    if step is not None:
        raise ValueError("the analysis tables do not keep each step's files: choose one rank for that")
    return {**views.table_page(d.files, FILE_COLUMNS, sort or views.DEFAULT_SORT, order, offset, limit, query),
            "step": None}


# ------------------------------------------------------------- rank views
def rank_filter(d: RankSessionData, node: Optional[str], ranks: Optional[str]) -> pd.Series:
    """Which rows of the ranks table the filter keeps: a host (node) and a
    rank list such as "0-15,32". ValueError (a 400) for what names nothing."""
    keep = pd.Series(True, index=d.ranks.index)
    if node is not None:
        if node not in set(d.ranks["host"]):
            raise ValueError("no such host among this session's ranks")
        keep &= d.ranks["host"] == node
    if ranks is not None:
        if not RANK_SPEC.fullmatch(ranks):
            raise ValueError('ranks must be a list such as "0-15,32"')
        wanted = set()
        for part in ranks.split(","):
            lo, _, hi = part.partition("-")
            lo, hi = int(lo), int(hi or lo)
            if hi < lo:
                raise ValueError(f"rank range {part} runs backwards")
            present = d.ranks["rank"][(d.ranks["rank"] >= lo) & (d.ranks["rank"] <= hi)]
            if present.empty:
                raise ValueError(f"no rank {part} in this session")
            wanted.update(int(r) for r in present)
        keep &= d.ranks["rank"].isin(wanted)
    return keep


def rank_wait(d: RankSessionData, node: Optional[str] = None, ranks: Optional[str] = None,
              offset: int = 0, limit: Optional[int] = None) -> Dict:
    """Ranks by the share of their step time spent in file input calls
    (analyze's figure), longest first: a page of them (offset, limit: all
    by default) and how many the filter keeps (total)."""
    r = d.ranks[rank_filter(d, node, ranks)]
    r = r.sort_values([input_wait.RANK_SHARE, "rank"], ascending=[False, True], na_position="last")
    total = len(r)
    r = r.iloc[offset: None if limit is None else offset + limit]
    return {"total": total, "offset": offset,"ranks": [int(x) for x in r["rank"]], "hosts": r["host"].astype(str).tolist(),
            input_wait.RANK_SHARE: _clean_list(r[input_wait.RANK_SHARE]), "label": input_wait.LABEL,
            input_wait.WAIT_TIME: _clean_list(r[input_wait.WAIT_TIME]),
            input_wait.STEP_TIME: _clean_list(r[input_wait.STEP_TIME]), "bytes_read": [int(b) for b in r["bytes_read"]],
            "partial": [bool(p) for p in r["partial"]],
            "all_hosts": sorted(set(d.ranks["host"].astype(str)))}


def rank_heatmap(d: RankSessionData, node: Optional[str] = None, ranks: Optional[str] = None,
                 width: Optional[int] = None) -> Dict:
    """Seconds of input wait per rank (rows, in rank order) and step
    (columns); past MAX_HEAT_CELLS, or past `width` columns (the chart's
    pixels), steps are summed in equal bins."""
    kept = d.ranks[rank_filter(d, node, ranks)]
    st = _real_steps(d)
    st = st[st["rank"].isin(kept["rank"])]
    grid = st.pivot_table(index="rank", columns="step", values=input_wait.WAIT_TIME, aggfunc="sum")
    grid = grid.reindex(sorted(kept["rank"]))
    per = max(1, math.ceil(grid.shape[1] * len(grid) / MAX_HEAT_CELLS)) if len(grid) else 1
    if width:
        per = max(per, math.ceil(grid.shape[1] / width))
    steps = grid.shape[1]
    if per > 1:
        bins = np.arange(grid.shape[1]) // per
        firsts = [int(grid.columns[i]) for i in range(0, grid.shape[1], per)]
        grid = grid.T.groupby(bins).sum(min_count=1).T
        grid.columns = firsts
    host = dict(zip(kept["rank"], kept["host"].astype(str)))
    return {"ranks": [int(x) for x in grid.index], "hosts": [host[x] for x in grid.index],
            "steps": [int(s) for s in grid.columns], "step_bin": per, "all_steps": int(steps),
            "wait": [_clean_list(row) for row in grid.to_numpy()]}


def no_ranks() -> Dict:
    """The rank views of a session that is not many ranks."""
    return {"ranks": [], "hosts": [], "steps": [], "wait": [], input_wait.RANK_SHARE: [], "all_hosts": [], "total": 0,
            "offset": 0}
