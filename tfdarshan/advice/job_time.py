"""What staging saves the job in wall time, and what the figure rests on.

From the step series of every process (rank): per (rank, step) its length
d and its input wait W (measures/input_wait.py: the wall time a read or
metadata call was in flight, on any thread; a series without that measure
gives the summed time capped at the step, and the figure says so), and per
(file, rank, step) what staging the file saves in time inside calls (the
cost model's saving, split over the cells that read the file by their
share of its expected time).

Time in calls is summed over threads; the step waits only for wall time.
So a cell's saving comes off its wait at the cell's wall rate: W over the
time its calls took (the larger of the cost model's expectation and the
measured sum), never more than W. Staging then shortens each rank's step
by what it takes off its wait, and

- ranks at their own pace (or one process): the job takes as long as its
  slowest rank's training steps, J = max over ranks of the sum of its step
  lengths, and after staging the same of the shortened steps;
- ranks in lockstep (a synchronous job: each rank waits for the slowest
  in a collective, so the ranks' steps end together): a step lasts its
  longest rank's length d_t, of which the longest wait of any rank, W*_t,
  is input and the rest, C_t = d_t - W*_t, computing; ranks are taken to
  compute alike, so after staging the step lasts C_t plus the longest wait
  left on any rank.

Either way a predicted saving never exceeds the slowest rank's measured
wait, nor its step time. It is an upper bound where reads overlapped
computation (a prefetching pipeline reads the next batch while the step
computes): that overlap is counted as waited, since nothing measured here
tells it apart. The other ranks are taken to keep their pace: where ranks
share a node's cores, a rank that stops waiting competes for them and the
others slow down (benchmarks/bench_advice.py, four ranks on two cores:
their training took 1-5 s longer after staging in most rounds), so the
prediction is then high: shared_cores names the nodes where the logs say
so (more ranks than cores), and recommend says it. Training steps only: the set-up before the first
step and the wind-down after the last are not job time here."""
from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import numpy as np
import pandas as pd

from tfdarshan.measures import input_wait
from tfdarshan.measures.time_in_calls import input_io_time

OWN_PACE, LOCKSTEP = "own pace", "lockstep"
# ranks whose steps end within this share of a step of each other (by the clock; else whose steps last
# within this share of each other) wait for each other
LOCKSTEP_SPREAD = 0.5
LOCKSTEP_LENGTHS = 0.10
ORIGIN = "origin"           # optional steps column: the Unix time its times count from (its log's start)
MODES = {OWN_PACE: "ranks run at their own pace: the job lasts as long as its slowest rank's training steps",
         LOCKSTEP: "ranks run in lockstep (their steps end together): each step lasts as long as its slowest rank's"}
# what a prediction is at most: the measured wait it rests on
WAITED = {OWN_PACE: "the slowest rank's measured input wait",
          LOCKSTEP: "the longest measured input wait of any rank, step by step,"}


def shared_cores(nodes) -> list:
    """The nodes (logdir.cores_per_node) that ran more ranks than they had
    cores: there the others' pace is not their own once a rank stops waiting."""
    return [n for n in nodes or () if n.get("cores") and n["ranks"] > n["cores"]]


def shared_cores_line(crowded) -> str:
    """What shared_cores means for the prediction, in words ("" for none)."""
    if not crowded:
        return ""
    where = "; ".join(f"{n['node']}: {n['ranks']} ranks on {n['cores']} core{'s' if n['cores'] != 1 else ''}"
                      for n in crowded[:4]) + (f"; and {len(crowded) - 4} more nodes" if len(crowded) > 4 else "")
    return (f"This prediction assumes each rank keeps its own pace, but {'a node' if len(crowded) == 1 else 'nodes'} "
            f"ran more ranks than cores ({where}): a rank that stops waiting for input competes with the others for "
            f"the cores and slows them, so the prediction may be optimistic.")


def step_cells(steps: pd.DataFrame, process: str = "host") -> pd.DataFrame:
    """Per counted training step of each process: process, step, duration
    d, wait W (input_wait.py) and the time its reads and metadata calls took
    summed over threads."""
    if steps is None or steps.empty or "start" not in steps:
        return pd.DataFrame({"process": pd.Series(dtype=object), "step": pd.Series(dtype="int64"),
                             "duration": pd.Series(dtype="float64"), "wait": pd.Series(dtype="float64"),
                             "summed": pd.Series(dtype="float64"), "ends": pd.Series(dtype="float64")})
    s = steps if process in steps else steps.assign(**{process: ""})
    c = input_wait.of_series(s)
    c = c[c["counted"]]
    ends = (c[ORIGIN] + c["end"]).to_numpy(np.float64) if ORIGIN in c else np.full(len(c), np.nan)
    cells = pd.DataFrame({"process": c[process].astype(str).to_numpy(), "step": c["step"].to_numpy(np.int64),
                          "duration": c["duration"].to_numpy(np.float64), "wait": c["wait"].to_numpy(np.float64),
                          "summed": input_io_time(c).to_numpy(np.float64), "ends": ends})
    if cells.duplicated(["process", "step"]).any():
        # a process whose series numbers a step twice (two windows, or a step
        # marked again): one cell, as the per-file rows of both are keyed alike
        cells = cells.groupby(["process", "step"], as_index=False, sort=False).agg(
            duration=("duration", "sum"), wait=("wait", "sum"), summed=("summed", "sum"), ends=("ends", "max"))
    return cells


def mode_of(cells: pd.DataFrame) -> str:
    """LOCKSTEP when several ranks wait for each other, else OWN_PACE. By
    the clock where the steps carry their logs' start (ORIGIN): ranks in
    lockstep end each step together (within LOCKSTEP_SPREAD of a step, for
    most steps all ranks have), ranks at their own pace drift apart, the
    slow one further behind every step. Without it (imported series): when
    their steps last alike (within LOCKSTEP_LENGTHS of the step's longest)."""
    if cells.empty or cells["process"].nunique() < 2:
        return OWN_PACE
    n = cells["process"].nunique()
    g = cells.groupby("step").agg(longest=("duration", "max"), shortest=("duration", "min"), size=("duration", "size"),
                                  first=("ends", "min"), last=("ends", "max"))
    g = g[(g["size"] == n) & (g["longest"] > 0)]
    if g.empty:
        return OWN_PACE
    if g["first"].notna().all():
        apart = (g["last"] - g["first"]) / float(g["longest"].median())
        return LOCKSTEP if float(apart.median()) <= LOCKSTEP_SPREAD else OWN_PACE
    spread = (g["longest"] - g["shortest"]) / g["longest"]
    return LOCKSTEP if float(spread.median()) <= LOCKSTEP_LENGTHS else OWN_PACE


def measured(steps: pd.DataFrame, mode: Optional[str] = None, process: str = "host") -> Dict:
    """A run's job time by the model's rule (mode_of unless given): what
    --compare holds before against after."""
    cells = step_cells(steps, process)
    mode = mode or mode_of(cells)
    if cells.empty:
        return {"mode": mode, "job_time": None, "steps": 0}
    if mode == LOCKSTEP:
        j = float(cells.groupby("step")["duration"].max().sum())
    else:
        j = float(cells.groupby("process")["duration"].sum().max())
    return {"mode": mode, "job_time": j, "steps": int(cells["step"].nunique())}


@dataclasses.dataclass
class JobModel:
    """J(x) = constant + sum over blocks of the largest (base - S x) among
    the block's rows, for a 0/1 choice x of candidate files. Own pace: one
    block, a row a rank (base: its training time). Lockstep: a block a step,
    a row a (rank, step) (base: its wait, at most the critical rank's;
    constant: the steps' computing time)."""
    mode: str
    base: np.ndarray                 # per row
    block_of_row: np.ndarray         # per row
    n_blocks: int
    S: object                        # scipy sparse (rows x candidates): wall seconds staging takes off
    constant: float
    candidates: np.ndarray           # indices into costs
    bound: str                       # which measure the waits rest on (input_wait.WALL, CAPPED, BOTH)
    slowest_wait: float              # the slowest rank's measured wait (own pace), or the critical path's
    slowest_time: float              # the slowest rank's training time (own pace), or the critical path's
    ranks: int
    steps: int
    slowest_rows: np.ndarray         # per row: is it the rank's that waited longest on input (the straggler)

    def slowest_saving(self) -> np.ndarray:
        """Per candidate, the wall time staging it takes off the rank that
        waited longest (whether or not the machine's load made another rank
        the longest this time)."""
        return np.asarray(self.S[self.slowest_rows].sum(axis=0)).ravel() if self.n_rows else np.zeros(0)

    @property
    def n_rows(self) -> int:
        return len(self.base)

    def job_time(self, x: np.ndarray) -> float:
        if not self.n_rows:
            return 0.0
        left = self.base - self.S @ np.asarray(x, dtype=np.float64)
        worst = np.full(self.n_blocks, -np.inf)
        np.maximum.at(worst, self.block_of_row, left)
        return float(self.constant + np.clip(worst, 0.0, None).sum())

    def x_of(self, chosen) -> np.ndarray:
        return np.isin(self.candidates, np.asarray(chosen, dtype=np.int64)).astype(np.float64)

    def saving(self, chosen) -> float:
        """Predicted job-time saving of staging `chosen` (indices into costs)."""
        return self.job_time(np.zeros(len(self.candidates))) - self.job_time(self.x_of(chosen))

    def to_dict(self) -> Dict:
        return {"mode": self.mode, "mode_means": MODES[self.mode], "bound": self.bound,
                "job_time": self.job_time(np.zeros(len(self.candidates))), "slowest_wait": self.slowest_wait,
                "slowest_time": self.slowest_time, "ranks": self.ranks, "steps": self.steps}


def file_cells(costs: pd.DataFrame, step_files: pd.DataFrame, process: str = "host",
               training_only: bool = True) -> pd.DataFrame:
    """(file index in costs, process, step, expected seconds) per cell: the
    step series' POSIX rows with the file's expected cost per metadata call
    and per read applied to the cell's calls; training steps only, unless
    told otherwise."""
    sf = step_files[step_files["module"] == "POSIX"] if "module" in step_files else step_files
    if training_only:
        sf = sf[sf["step"] >= 0]
    if process not in sf:
        sf = sf.assign(**{process: ""})
    index = pd.Series(np.arange(len(costs)), index=costs["path"].to_numpy())
    index = index[~index.index.duplicated()]
    sf = sf[sf["path"].isin(index.index)]
    f = index.reindex(sf["path"].to_numpy()).to_numpy()
    meta = costs["meta_unit"].to_numpy(np.float64)[f] * (sf["opens"] + sf["stats"]).to_numpy(np.float64)
    reads = costs["read_unit"].to_numpy(np.float64)[f] * sf["reads"].to_numpy(np.float64)
    return pd.DataFrame({"file": f.astype(np.int64), "process": sf[process].astype(str).to_numpy(),
                         "step": sf["step"].to_numpy(np.int64), "expected": meta + reads})


def model(costs: pd.DataFrame, steps: pd.DataFrame, step_files: pd.DataFrame, candidates: np.ndarray,
          mode: Optional[str] = None, process: str = "host") -> Optional[JobModel]:
    """The job model of a session (None without training steps)."""
    from scipy import sparse
    sc = step_cells(steps, process)
    if sc.empty or step_files is None or step_files.empty:
        return None
    mode = mode or mode_of(sc)
    every = file_cells(costs, step_files, process, training_only=False)
    fc = every[every["step"] >= 0]
    # cells of steps the series counts (not cut by the window's end)
    key = pd.MultiIndex.from_frame(sc[["process", "step"]])
    row_of_cell = key.get_indexer(pd.MultiIndex.from_frame(fc[["process", "step"]]))
    fc = fc[row_of_cell >= 0]
    row_of_cell = row_of_cell[row_of_cell >= 0]
    # each file's saving over its cells by their share of its expected time (the set-up's reads of it, and
    # a step the window cut, keep theirs: they are not job time here)
    per_file = np.bincount(every["file"], weights=every["expected"], minlength=len(costs))
    share = fc["expected"].to_numpy() / np.maximum(per_file[fc["file"].to_numpy()], 1e-300)
    saving = costs["saving"].to_numpy(np.float64)[fc["file"].to_numpy()] * share
    # each (rank, step)'s wall rate: its wait over the time its calls took
    expected = np.bincount(row_of_cell, weights=fc["expected"].to_numpy(), minlength=len(sc))
    calls = np.maximum(expected, sc["summed"].to_numpy())
    rate = np.where(calls > 0, sc["wait"].to_numpy() / np.maximum(calls, 1e-300), 0.0)
    wall = saving * rate[row_of_cell]
    column = np.full(len(costs), -1)
    column[candidates] = np.arange(len(candidates))
    col = column[fc["file"].to_numpy()]
    keep = (col >= 0) & (wall > 0)
    d, w = sc["duration"].to_numpy(), sc["wait"].to_numpy()
    procs, proc_of_cell = np.unique(sc["process"].to_numpy(), return_inverse=True)
    if mode == LOCKSTEP:
        steps_, block = np.unique(sc["step"].to_numpy(), return_inverse=True)
        # a step lasts its longest rank's time; the rank every other waits for is the one that waited
        # longest on input, and the rest of the step is computing, which staging leaves alone
        length, most = np.zeros(len(steps_)), np.zeros(len(steps_))
        np.maximum.at(length, block, d)
        np.maximum.at(most, block, w)
        constant = float((length - np.minimum(most, length)).sum())
        base = np.minimum(w, length[block])
        rows, n_rows, n_blocks = np.arange(len(sc)), len(sc), len(steps_)
        slowest_wait, slowest_time = float(np.minimum(most, length).sum()), float(length.sum())
        slow = int(np.argmax(np.bincount(proc_of_cell, weights=w, minlength=len(procs))))
        slowest_rows = proc_of_cell == slow
    else:
        rows, n_rows, n_blocks = proc_of_cell, len(procs), 1
        block = np.zeros(n_rows, dtype=np.int64)
        base = np.bincount(proc_of_cell, weights=d, minlength=n_rows)
        constant = 0.0
        slow = int(np.argmax(base))
        slowest_wait = float(w[proc_of_cell == slow].sum())
        slowest_time = float(base[slow])
        slowest_rows = np.arange(n_rows) == int(np.argmax(np.bincount(proc_of_cell, weights=w, minlength=n_rows)))
    S = sparse.csc_matrix((wall[keep], (rows[row_of_cell[keep]], col[keep])), shape=(n_rows, len(candidates)))
    return JobModel(mode, base.astype(np.float64), block.astype(np.int64), int(n_blocks), S, constant,
                    np.asarray(candidates, dtype=np.int64), input_wait.bound_of(steps), slowest_wait,
                    slowest_time, int(len(procs)), int(sc["step"].nunique()), slowest_rows)


def at_most(m: Dict) -> str:
    """What a prediction from model `m` (JobModel.to_dict) can never exceed, in words."""
    from tfdarshan.measures.human import human_time
    return f"at most {WAITED[m['mode']]} {human_time(m['slowest_wait'])}, measured as {m['bound']}"


def candidates_of(costs: pd.DataFrame, stageable: np.ndarray) -> np.ndarray:
    """Files a plan may stage that save something (indices into costs)."""
    return np.flatnonzero(np.asarray(stageable, dtype=bool) & (costs["saving"].to_numpy(np.float64) > 0))


def predict(costs: pd.DataFrame, steps: pd.DataFrame, step_files: pd.DataFrame, stageable: np.ndarray,
            plans: Dict[str, np.ndarray], mode: Optional[str] = None) -> Optional[Dict]:
    """Each plan's predicted job-time saving: {"model": JobModel.to_dict(),
    "savings": {name: seconds}}; None without training steps."""
    jm = model(costs, steps, step_files, candidates_of(costs, stageable), mode)
    if jm is None:
        return None
    return {"model": jm.to_dict(), "savings": {k: jm.saving(v) for k, v in plans.items()}}


def input_wait_of(steps: pd.DataFrame, process: str = "host") -> Dict:
    """The job's input wait (input_wait.py's one figure) for recommend's report."""
    c = input_wait.of_series(steps)
    c = c[c["counted"]]
    ranks = int(steps[process].nunique()) if process in steps and len(steps) else 1
    share = input_wait.share(c["wait"].sum(), c["duration"].sum())
    return {"share": share, "ranks": ranks, "line": input_wait.job_line(share, ranks)}
