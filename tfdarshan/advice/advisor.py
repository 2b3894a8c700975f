"""Which input data to put on the fast tier, and what it will save.

Cost model (cost_model.py), per file: its expected I/O time now, from the
median costs of a metadata call and a read request among files like it on
its storage (not from its own worst call); on a candidate tier
    opens * open_latency + stats * stat_latency + reads * read_latency + bytes / bandwidth
with that tier's probed or declared figures. The saving of staging a file
is the difference, for every run that reads it as this one did.

Choice: a 0/1 knapsack (knapsack.py) over the files (or datasets) under
the fast tier's free capacity, maximising the predicted saving: exact dynamic programming
when the instance is small, otherwise the greedy-by-ratio solution or the
single best item, whichever saves more (at least half the optimum). It is
compared with the paper's rule ("files under 2 MB") and with "largest I/O
time first".

With step series (a profiled training run), each plan's saving is also
predicted in job time (job_time.py: wall time, from the steps' lengths and
input waits), which is what the headline and the comparison with the rules
speak in; the summed I/O time saved stays beside it."""
from __future__ import annotations

import dataclasses
import fnmatch
import os
import re
import time
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd

from tfdarshan.advice import checkpoint_findings, job_time, mapped_input, reread_finding
from tfdarshan.advice import tiers as T
from tfdarshan.advice import training_input as TI
from tfdarshan.advice.compare import compare_runs  # noqa: F401  (re-exported)
from tfdarshan.advice.cost_model import file_costs  # noqa: F401  (re-exported)
from tfdarshan.advice import tfdata_files as TD
from tfdarshan.measures.human import count, human_time
from tfdarshan.advice.findings import Finding, as_dicts
from tfdarshan.advice.knapsack import BLOCK, DP_CELLS, knapsack  # noqa: F401  (re-exported)
from tfdarshan.advice.knapsack import _exact, _fill_in_order, _greedy  # noqa: F401  (re-exported)
from tfdarshan.capture.snapshot import Snapshot

SMALL_FILE = 2 * 1024 * 1024          # the paper's threshold


# ----------------------------------------------------------------- datasets
def shard_pattern(path: str) -> str:
    """train-00003-of-01024.tfrecord -> <dir>/train-*-of-*.tfrecord"""
    d, base = os.path.split(path)
    return os.path.join(d, re.sub(r"\d+", "*", base))


def datasets(paths: Sequence[str], globs: Sequence[str] = (), by: str = "pattern") -> List[str]:
    """The dataset each path belongs to: the first user glob it matches,
    else its shard pattern (or its directory)."""
    out = []
    for p in paths:
        g = next((g for g in globs if fnmatch.fnmatch(p, g)), None)
        if g:
            out.append(g)
        elif by == "directory":
            out.append(os.path.dirname(p) + "/")
        else:
            out.append(shard_pattern(p))
    return out


def _stageable(costs: pd.DataFrame) -> pd.Series:
    """Rows a plan may take: training input not already on the fast tier."""
    return ~costs["on_fast_tier"] & (costs["training_input"] if "training_input" in costs else True)


def _in_order(costs: pd.DataFrame, rows: np.ndarray, column: str, descending: bool = False) -> np.ndarray:
    """The rows' positions sorted by a column, stably (the table is not copied)."""
    rows = np.flatnonzero(rows)
    key = costs[column].to_numpy(np.float64)[rows]
    return rows[np.argsort(-key if descending else key, kind="stable")]


def under_2mb(costs: pd.DataFrame, capacity: int) -> np.ndarray:
    """The paper's rule: files under 2 MB, smallest first, while they fit."""
    sizes = costs["size"].to_numpy()
    cand = _in_order(costs, (sizes < SMALL_FILE) & np.asarray(_stageable(costs), dtype=bool), "size")
    return _fill_in_order(cand, sizes, capacity)


def largest_time_first(costs: pd.DataFrame, capacity: int) -> np.ndarray:
    cand = _in_order(costs, np.asarray(_stageable(costs), dtype=bool), "current_time", descending=True)
    return _fill_in_order(cand, costs["size"].to_numpy(), capacity)


# ---------------------------------------------------------------- diagnosis
def diagnose(snap: Snapshot, costs: pd.DataFrame, steps: Optional[pd.DataFrame] = None) -> List[Finding]:
    p = snap.posix[snap.posix["POSIX_READS"] > 0]
    out: List[Finding] = mapped_input.findings(costs)
    if p.empty:
        return out
    reads = int(p["POSIX_READS"].sum())
    # a file both fopen'ed and open'ed has a POSIX and a STDIO row in extra
    ex = snap.extra[snap.extra["module"] == "POSIX"] if len(snap.extra) else snap.extra
    zero = ex.set_index("record_id")["ZERO_READS"].reindex(p["record_id"]).fillna(0) \
        if len(ex) else pd.Series(0, index=p["record_id"])
    n_zero = int(zero.sum())
    tiny = int(p["POSIX_SIZE_READ_0_100"].sum())
    under_4k = tiny + int(p["POSIX_SIZE_READ_100_1K"].sum()) + int(p["POSIX_SIZE_READ_1K_10K"].sum())
    nbytes = int(p["POSIX_BYTES_READ"].sum())
    files = len(p)
    read_time = float(p["POSIX_F_READ_TIME"].sum())
    meta_time = float(p["POSIX_F_META_TIME"].sum())
    mean_req = nbytes / max(reads - n_zero, 1)

    data_reads = reads - n_zero
    zero_known = snap.meta.get("zero_reads_known", True)
    if not zero_known and tiny >= reads / 2:
        out.append(Finding(
            "INFO", "Half or more of the reads are under 100 bytes, or end-of-file reads",
            f"{tiny} of {count(reads, 'read')} moved 100 bytes or less; how many were end-of-file reads that "
            f"returned 0 bytes (cheap, and not worth packing files for) is unknown: this log has neither a "
            f"trace nor tfdarshan's step series.",
            "Profile with tfdarshan (or trace=True) to tell them apart before acting on this.",
            {"reads": reads, "under_100": tiny, "zero": None}))
    elif data_reads > 0 and tiny - n_zero >= data_reads / 2:
        out.append(Finding(
            "HIGH", "Half or more of the reads are under 100 bytes",
            f"{tiny - n_zero} of {count(data_reads, 'read')} that returned data ({100 * (tiny - n_zero) / data_reads:.0f} %) "
            f"moved 100 bytes or less.",
            "Pack records into larger TFRecord shards, or read in larger pieces.",
            {"reads": data_reads, "under_100": tiny - n_zero}))
    if n_zero and (files >= 5 and n_zero >= 0.9 * files or n_zero >= reads / 2):
        # one finding on end-of-file reads, with what they cost here: measured, or said to be unknown
        each = _zero_read_cost(snap)
        share = n_zero * each / read_time if each is not None and read_time > 0 else None
        cost = (f"about {human_time(each)} each (measured in the trace), {human_time(n_zero * each)} of "
                f"{human_time(read_time)} read time ({100 * share:.0f} %)" if share is not None else
                "their cost is unknown: without a trace their time is not told apart from the data reads'")
        out.append(Finding(
            "WARN" if share is not None and share >= 0.2 else "INFO", "A zero-length read after every file",
            f"{count(n_zero, 'zero-byte read')} for {count(files, 'file')}: each file is read to its end and once more "
            f"(TensorFlow's ReadFile pattern); {cost}.",
            "Many small files pay this once each: pack them into TFRecord shards so one open and one "
            "end-of-file check serve thousands of examples." if share is not None and share >= 0.2 else
            "A small share of the read time here: nothing to change for it alone." if share is not None else
            "Profile with the trace (trace=True, tfdarshan run --trace) to measure them before acting on this.",
            {"zero_reads": n_zero, "files": files, "seconds_each": each, "share_of_read_time": share}))
    if reads - n_zero > 0 and under_4k - n_zero > (reads - n_zero) / 2:
        out.append(Finding(
            "WARN", "Many small reads",
            f"mean request {mean_req / 1024:.1f} KiB; {under_4k - n_zero} of {count(reads - n_zero, 'non-empty read')} "
            f"are under 10 KiB.",
            "Read in larger pieces: TFRecordDataset(buffer_size=...) of a few MiB, or larger files.",
            {"mean_request": mean_req}))
    seq = float(p["POSIX_SEQ_READS"].sum()) / max(reads, 1)
    if reads >= 20 and seq < 0.5:
        out.append(Finding(
            "WARN", "Mostly random access",
            f"only {100 * seq:.0f} % of reads continue past the previous one.",
            "Shuffle file order or a shuffle buffer instead of seeking inside files; random reads favour a "
            "low-latency tier.", {"sequential_fraction": seq}))
    if read_time + meta_time > 0 and meta_time / (read_time + meta_time) > 0.3:
        out.append(Finding(
            "WARN", "Metadata-heavy access",
            f"{100 * meta_time / (read_time + meta_time):.0f} % of I/O time goes to opens, stats and seeks "
            f"({count(int(p['POSIX_OPENS'].sum()), 'open')}, {count(int(p['POSIX_STATS'].sum()), 'stat')} for "
            f"{count(files, 'file')}).",
            "Fewer, larger files, or a tier with lower open latency (node-local disk, /dev/shm).",
            {"meta_share": meta_time / (read_time + meta_time)}))
    out.extend(reread_finding.findings(snap, costs))
    conc = _concurrency(snap)
    if conc is not None and conc < 1.5 and read_time > 0.05 * max(snap.end - snap.start, 1e-9):
        out.append(Finding(
            "WARN", "Too few parallel reads",
            f"on average {conc:.2f} reads are in flight at a time while the input pipeline reads.",
            "Read in parallel: map(..., num_parallel_calls=tf.data.AUTOTUNE), "
            "interleave(..., num_parallel_calls=tf.data.AUTOTUNE), and prefetch.",
            {"concurrency": conc}))
    return out


def _zero_read_cost(snap: Snapshot) -> Optional[float]:
    """Seconds per zero-byte read, measured in the trace; None without one
    (the mean read would charge them what reading data costs)."""
    dxt = snap.dxt
    if len(dxt):
        z = dxt[(dxt["op"] == "read") & (dxt["length"] == 0)]
        if len(z):
            return float((z["end"] - z["start"]).median())
    return None


def _concurrency(snap: Snapshot) -> Optional[float]:
    """Mean number of reads in flight while any is: from the trace if there
    is one, else read time over the span between first and last read."""
    dxt = snap.dxt
    if len(dxt):
        r = dxt[dxt["op"] == "read"]
        if r.empty:
            return None
        busy = (r["end"] - r["start"]).sum()
        ev = np.concatenate([np.stack([r["start"], np.ones(len(r))], 1), np.stack([r["end"], -np.ones(len(r))], 1)])
        ev = ev[np.lexsort((ev[:, 1], ev[:, 0]))]
        depth = np.cumsum(ev[:, 1])
        covered = float(np.sum(np.diff(ev[:, 0]) * (depth[:-1] > 0)))
        return float(busy / covered) if covered > 0 else None
    p = snap.posix[snap.posix["POSIX_READS"] > 0]
    starts = p["POSIX_F_READ_START_TIMESTAMP"]
    span = float(p["POSIX_F_READ_END_TIMESTAMP"].max() - starts[starts > 0].min()) if (starts > 0).any() else 0
    return float(p["POSIX_F_READ_TIME"].sum()) / span if span > 0 else None


# ------------------------------------------------------------------ advice
@dataclasses.dataclass
class Advice:
    fast_tier: T.Tier
    capacity: int
    costs: pd.DataFrame
    chosen: np.ndarray
    baselines: Dict[str, np.ndarray]
    findings: List[Finding]
    granularity: str
    source: str = ""
    left_out: List[Dict] = dataclasses.field(default_factory=list)   # not training input, and why
    plans: Optional[Dict] = None            # a multi-rank session's plans (critical_path.py)
    # job-time predictions (job_time.py): {"model": ..., "savings": {"chosen" or a rule's name: seconds}}
    job: Optional[Dict] = None
    job_input_wait: Optional[Dict] = None   # the job's input wait (measures/input_wait.py): share, ranks, bound

    def saving(self, idx) -> float:
        return float(self.costs["saving"].to_numpy()[idx].sum()) if len(idx) else 0.0

    def saving_range(self, idx):
        """(low, high): the 95 % range of the saving, from the spread of the
        chosen files' peers."""
        if not len(idx):
            return 0.0, 0.0
        return (float(self.costs["saving_low"].to_numpy()[idx].sum()),
                float(self.costs["saving_high"].to_numpy()[idx].sum()))

    def confidence(self, idx) -> str:
        """How much evidence stands behind the saving: the share of it that
        comes from files with at least 8 peers measured alike."""
        saving = self.costs["saving"].to_numpy()[idx]
        if not len(idx) or saving.sum() <= 0:
            return "none"
        backed = saving[self.costs["peers"].to_numpy()[idx] >= 8].sum() / saving.sum()
        return "high" if backed >= 0.9 else "medium" if backed >= 0.5 else "low"

    def bytes(self, idx) -> int:
        return int(self.costs["size"].to_numpy()[idx].sum()) if len(idx) else 0

    @property
    def _input(self) -> pd.DataFrame:
        c = self.costs
        return c[c["training_input"]] if "training_input" in c else c

    @property
    def current_time(self) -> float:
        """Measured I/O time of the training input."""
        return float(self._input["current_time"].sum())

    @property
    def expected_time(self) -> float:
        """The same, as the cost model expects it now: what savings are out of."""
        return float(self._input["expected_time"].sum())

    def selection(self) -> pd.DataFrame:
        """What to stage, grouped by dataset."""
        c = self.costs.iloc[self.chosen]
        if c.empty:
            return pd.DataFrame(columns=["name", "files", "bytes", "saving", "current_time", "expected_time",
                                         "of_files"])
        totals = self.costs.assign(ds=datasets(self.costs["path"])).groupby("ds")["path"].size()
        g = c.assign(ds=datasets(c["path"])).groupby("ds").agg(
            files=("path", "size"), bytes=("size", "sum"), saving=("saving", "sum"),
            current_time=("current_time", "sum"), expected_time=("expected_time", "sum")
        ).reset_index().rename(columns={"ds": "name"})
        g["of_files"] = g["name"].map(totals)
        return g.sort_values("saving", ascending=False).reset_index(drop=True)

    @property
    def job_saving(self) -> Optional[float]:
        """The chosen plan's predicted job-time saving (None without step series)."""
        return self.job["savings"].get("chosen") if self.job else None

    def summary(self) -> str:
        # the saving is out of the time the cost model expects now (never more than it)
        s, cur = self.saving(self.chosen), self.expected_time
        lo, hi = self.saving_range(self.chosen)
        where = (f"Stage {count(len(self.chosen), 'file')} ({self.bytes(self.chosen) / 2**20:.1f} MiB of a "
                 f"{self.capacity / 2**20:.1f} MiB budget) on {self.fast_tier.label}")
        io = (f"input I/O time {human_time(cur)} -> {human_time(cur - s)} ({100 * s / cur if cur else 0:.0f} % "
              f"less; saving {human_time(s)}, 95 % range {human_time(lo)}-{human_time(hi)}, confidence "
              f"{self.confidence(self.chosen)})")
        if self.job is None:
            b2 = self.saving(self.baselines["under_2mb"])
            return f"{where}: predicted {io}; the files-under-2-MB rule would save {human_time(b2)}."
        m, j = self.job["model"], self.job_saving
        rule = self.job["savings"].get("under_2mb")
        return (f"{where}: predicted job time {human_time(m['job_time'])} -> {human_time(m['job_time'] - j)} "
                f"(saves {human_time(j)}; {job_time.MODES[m['mode']]}; {job_time.at_most(m)}; an upper bound where "
                f"reads overlapped computation); the files-under-2-MB rule would save {human_time(rule or 0.0)} of job "
                f"time. Summed over threads and ranks: {io}.")

    def to_dict(self) -> Dict:
        sel = self.selection()
        return {
            "created": time.time(), "source": self.source, "granularity": self.granularity,
            "fast_tier": self.fast_tier.to_dict(), "capacity": self.capacity,
            "current_time": self.current_time, "expected_time": self.expected_time, "summary": self.summary(),
            "predicted_saving": self.saving(self.chosen), "bytes": self.bytes(self.chosen),
            "predicted_job_saving": self.job_saving, "job": self.job, "job_input_wait": self.job_input_wait,
            "predicted_saving_range": list(self.saving_range(self.chosen)),
            "confidence": self.confidence(self.chosen),
            "selection": [{"name": r.name, "files": int(r.files), "of_files": int(r.of_files),
                           "bytes": int(r.bytes), "saving": float(r.saving), "expected_time": float(r.expected_time),
                           "current_time": float(r.current_time)} for r in sel.itertuples()],
            "files": [{"path": self.costs["path"].iat[i], "size": int(self.costs["size"].iat[i]),
                       "saving": float(self.costs["saving"].iat[i]),
                       "current_time": float(self.costs["current_time"].iat[i]),
                       "predicted_time": float(self.costs["predicted_time"].iat[i])} for i in self.chosen],
            "baselines": {name: {"files": int(len(idx)), "bytes": self.bytes(idx), "saving": self.saving(idx)}
                          for name, idx in self.baselines.items()},
            "findings": as_dicts(self.findings),
            "left_out": self.left_out, **({"plans": self.plans} if self.plans else {}),
        }


def recommend(snap: Snapshot, fast: T.Tier, capacity: Optional[int] = None, *, tiers: Sequence[T.Tier] = (),
              granularity: str = "file", globs: Sequence[str] = (), steps: Optional[pd.DataFrame] = None,
              step_files: Optional[pd.DataFrame] = None, source: str = "") -> Advice:
    """The staging advice for the I/O in `snap` (see the module docstring);
    only training input is staged (training_input.py: step_files, the step
    series with paths, tells what was read inside training steps)."""
    if capacity is None:
        capacity = fast.capacity if fast.capacity is not None else 0
    if capacity <= 0:
        raise ValueError("the fast tier needs a capacity (free bytes) greater than zero")
    costs = file_costs(snap, fast, tiers, mapped_input.storage_of_mapped(steps, step_files))
    in_steps = TI.read_in_steps(costs["path"], step_files)
    # the files written and not read (a cache's lock file) tell what some of the read ones are
    others = TD.lock_files(snap, costs["path"])
    why = TI.reasons(costs["path"], in_steps, others)
    costs["training_input"] = why == ""
    costs["tfdata"] = TD.kinds(costs["path"], in_steps, others)
    values = np.where(_stageable(costs), costs["saving"].to_numpy(np.float64), 0.0) if len(costs) else np.zeros(0)
    if granularity == "dataset" and len(costs):
        ds = np.array(datasets(costs["path"], globs))
        g = costs.assign(ds=ds, value=values).groupby("ds", sort=False).agg(size=("size", "sum"),
                                                                            saving=("value", "sum"))
        picked = set(g.index[knapsack(g["size"].to_numpy(), g["saving"].to_numpy(), capacity)])
        chosen = np.nonzero(np.isin(ds, list(picked)) & costs["training_input"].to_numpy(bool))[0]
    elif granularity == "file":
        chosen = knapsack(costs["size"].to_numpy(), values, capacity) if len(costs) \
            else np.zeros(0, dtype=np.int64)
    else:
        raise ValueError(f"granularity must be 'file' or 'dataset', not {granularity!r}")
    none = np.zeros(0, dtype=np.int64)      # a run that read nothing (a checkpoint-only run) has no candidates
    baselines = {"under_2mb": under_2mb(costs, capacity) if len(costs) else none,
                 "largest_time_first": largest_time_first(costs, capacity) if len(costs) else none}
    found = diagnose(snap, costs, steps) + checkpoint_findings.findings(snap, fast, steps)
    advice = Advice(fast, capacity, costs, chosen, baselines, found, granularity, source,
                    TI.left_out(costs["path"].tolist(), costs["size"].to_numpy(), why))
    if steps is not None and len(steps):
        advice.job_input_wait = job_time.input_wait_of(steps)
        if step_files is not None and len(step_files) and len(costs):
            advice.job = job_time.predict(costs, steps, step_files, np.asarray(_stageable(costs), dtype=bool),
                                          {"chosen": chosen, **baselines})
    return advice
