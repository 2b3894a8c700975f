"""Staging for synchronous many-rank jobs: the critical path.

A synchronous step ends when its slowest rank is done, so what staging
saves the job is what it takes off the slowest rank of each step, not the
I/O time it saves summed over ranks. With the cost model's expected time
of every (rank, step) cell, E[r, t], and what staging file f saves there,
S[f, r, t] (its saving split over its cells by their share of its expected
time), the job's file I/O on the critical path is

    J(x) = sum over steps t of  max over ranks r of  (E[r, t] - sum_f S[f, r, t] x_f)

and the critical-path plan picks x (0/1, within the capacity) to minimise
it: a small mixed-integer program (variables x_f and z_t >= each rank's
time in step t), solved by SciPy's `milp` (HiGHS) within a time and size
budget, by a greedy rule beyond it (take the file that lowers J most per
byte, by how much it shortens each step's slowest rank before the next
slowest one takes over). Without step markers the window is one step.
The plan that saves the most summed over ranks ("total") is reported
beside it, each with what it saves in job time. Ranks are assumed to
compute alike: J is the I/O part of the critical path."""
from __future__ import annotations

import time
from typing import Dict, Optional

import numpy as np
import pandas as pd

MILP_CELLS = 200_000        # nonzero (file, rank, step) savings the exact program takes
MILP_FILES = 20_000
MILP_SECONDS = 10.0         # HiGHS' time limit; its best plan so far is used past it
TIE_BREAK = 1e-4            # among equally short critical paths, the one saving most in all
GREEDY_ROUNDS = 5_000       # past this many picks the greedy fills by summed saving per byte


def cells_of(costs: pd.DataFrame, step_files: pd.DataFrame, process: str = "host") -> pd.DataFrame:
    """(file index in costs, process, step, expected seconds) per cell: the
    step series' POSIX rows with the file's expected cost per metadata call
    and per read applied to the cell's calls. Training steps only, when
    there are any (the set-up and the wind-down wait for no other rank)."""
    sf = step_files[step_files["module"] == "POSIX"] if "module" in step_files else step_files
    if (sf["step"] >= 0).any():
        sf = sf[sf["step"] >= 0]
    index = pd.Series(np.arange(len(costs)), index=costs["path"].to_numpy())
    sf = sf[sf["path"].isin(index.index)]
    f = index.reindex(sf["path"].to_numpy()).to_numpy()
    meta = costs["meta_unit"].to_numpy(np.float64)[f] * (sf["opens"] + sf["stats"]).to_numpy(np.float64)
    reads = costs["read_unit"].to_numpy(np.float64)[f] * sf["reads"].to_numpy(np.float64)
    return pd.DataFrame({"file": f, "process": sf[process].astype(str).to_numpy(),
                         "step": sf["step"].to_numpy(np.int64), "expected": meta + reads})


class Problem:
    """The (rank, step) rows, each file's savings in them, and J(x)."""

    def __init__(self, costs: pd.DataFrame, cells: pd.DataFrame, candidates: np.ndarray):
        from scipy import sparse
        rows = cells.groupby(["process", "step"], sort=True).ngroup().to_numpy()
        self.n_rows = int(rows.max()) + 1 if len(rows) else 0
        self.expected = np.bincount(rows, weights=cells["expected"].to_numpy(), minlength=self.n_rows)
        keys = cells.assign(row=rows).drop_duplicates("row").sort_values("row")
        self.step_of_row = pd.factorize(keys["step"].to_numpy())[0] if len(keys) else np.zeros(0, np.int64)
        self.n_steps = int(self.step_of_row.max()) + 1 if len(keys) else 0
        # a file's saving split over its cells by their share of its expected time
        per_file = np.bincount(cells["file"], weights=cells["expected"].to_numpy(), minlength=len(costs))
        share = cells["expected"].to_numpy() / np.maximum(per_file[cells["file"].to_numpy()], 1e-300)
        column = np.full(len(costs), -1)
        column[candidates] = np.arange(len(candidates))
        col = column[cells["file"].to_numpy()]
        keep = (col >= 0) & (share > 0)
        saving = costs["saving"].to_numpy(np.float64)[cells["file"].to_numpy()] * share
        self.S = sparse.csc_matrix((saving[keep], (rows[keep], col[keep])), shape=(self.n_rows, len(candidates)))
        self.candidates = candidates

    def job_time(self, x: np.ndarray) -> float:
        """J(x): per step its slowest row, summed."""
        if not self.n_rows:
            return 0.0
        left = self.expected - self.S @ x.astype(np.float64)
        worst = np.full(self.n_steps, -np.inf)
        np.maximum.at(worst, self.step_of_row, left)
        return float(np.clip(worst, 0.0, None).sum())


def plan(costs: pd.DataFrame, cells: pd.DataFrame, stageable: np.ndarray, capacity: int,
         total_chosen: np.ndarray, objective: str = "critical-path") -> Dict:
    """Both plans with their job-time and summed savings; "chosen" is the
    objective's (indices into costs)."""
    sizes = costs["size"].to_numpy(np.int64)
    savings = costs["saving"].to_numpy(np.float64)
    candidates = np.nonzero(stageable & (savings > 0) & (sizes <= capacity))[0]
    p = Problem(costs, cells, candidates)
    started = time.perf_counter()
    x, how = solve(p, sizes[candidates], savings[candidates], capacity)
    cp = np.sort(candidates[x > 0.5])
    now = p.job_time(np.zeros(len(candidates)))
    total_x = np.isin(candidates, total_chosen).astype(np.float64)
    if p.job_time(total_x) < p.job_time(x) - 1e-12:     # a heuristic's plan can lose to the summed one
        cp, how = np.sort(candidates[total_x > 0.5]), how + "; the total plan's files, shorter on the critical path"

    def figures(chosen: np.ndarray) -> Dict:
        x = np.isin(candidates, chosen).astype(np.float64)
        return {"files": int(len(chosen)), "bytes": int(sizes[chosen].sum()),
                "job_saving": now - p.job_time(x), "summed_saving": float(savings[chosen].sum())}
    out = {"objective": objective, "job_time": now, "steps": p.n_steps,
           "ranks": int(cells["process"].nunique()), "solver": how,
           "solve_seconds": time.perf_counter() - started,
           "critical_path": figures(cp), "total": figures(np.asarray(total_chosen, dtype=np.int64))}
    out["chosen"] = cp if objective == "critical-path" else np.asarray(total_chosen, dtype=np.int64)
    return out


def solve(p: Problem, sizes: np.ndarray, savings: np.ndarray, capacity: int):
    """(x, how it was found): HiGHS within the budget, else the greedy rule;
    the better of the two when HiGHS stopped at its time limit."""
    n = len(sizes)
    if n == 0:
        return np.zeros(0), "nothing to stage"
    if sizes.sum() <= capacity:
        return np.ones(n), "everything fits"
    greedy = _greedy(p, sizes, savings, capacity)
    if p.S.nnz > MILP_CELLS or n > MILP_FILES:
        return greedy, f"greedy ({p.S.nnz:,} cells, beyond the exact solver's budget of {MILP_CELLS:,})"
    x, status = _milp(p, sizes, savings, capacity)
    if x is None:
        return greedy, f"greedy (HiGHS: {status})"
    if status != "optimal" and p.job_time(greedy) < p.job_time(x):
        return greedy, f"greedy (better than HiGHS' best within {MILP_SECONDS:.0f} s)"
    return x, "HiGHS (scipy.optimize.milp), " + status


def _milp(p: Problem, sizes: np.ndarray, savings: np.ndarray, capacity: int):
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp
    n, T = p.S.shape[1], p.n_steps
    touched = np.diff(p.S.tocsr().indptr) > 0
    # rows no candidate touches only bound their step's z from below
    floor = np.zeros(T)
    np.maximum.at(floor, p.step_of_row[~touched], p.expected[~touched])
    rows = np.nonzero(touched)[0]
    z = sparse.csr_matrix((np.ones(len(rows)), (np.arange(len(rows)), p.step_of_row[rows])), shape=(len(rows), T))
    A = sparse.hstack([p.S.tocsr()[rows], z]).tocsr()
    cap = sparse.csr_matrix(np.concatenate([sizes / capacity, np.zeros(T)])[None, :])
    constraints = [LinearConstraint(A, p.expected[rows], np.inf), LinearConstraint(cap, -np.inf, 1.0)]
    c = np.concatenate([-TIE_BREAK * savings, np.ones(T)])
    res = milp(c, constraints=constraints, integrality=np.concatenate([np.ones(n), np.zeros(T)]),
               bounds=Bounds(np.concatenate([np.zeros(n), floor]), np.concatenate([np.ones(n), np.full(T, np.inf)])),
               options={"time_limit": MILP_SECONDS, "disp": False})
    if res.x is None:
        return None, res.message
    x = (res.x[:n] > 0.5).astype(np.float64)
    if sizes @ x > capacity:            # rounding of a near-integral answer must still fit
        return None, "its plan did not fit after rounding"
    return x, "optimal" if res.status == 0 else f"best found within {MILP_SECONDS:.0f} s"


def _greedy(p: Problem, sizes: np.ndarray, savings: np.ndarray, capacity: int) -> np.ndarray:
    """Repeatedly the file that shortens the slowest rows most per byte; by
    summed saving per byte once no file shortens them."""
    n = len(sizes)
    x = np.zeros(n)
    room = int(capacity)
    S = p.S.tocsr()
    left = p.expected.copy()
    for _ in range(min(n, GREEDY_ROUNDS)):
        worst = np.full(p.n_steps, -np.inf)
        np.maximum.at(worst, p.step_of_row, left)
        is_top = left >= worst[p.step_of_row]
        # the next slowest row of each step (the top one's own value when it stands alone)
        runner = np.full(p.n_steps, -np.inf)
        np.maximum.at(runner, p.step_of_row, np.where(is_top, -np.inf, left))
        runner = np.where(np.isfinite(runner), runner, 0.0)
        # a file's gain: for each step's slowest row (alone at the top), how far it lowers
        # it before the next takes over; a lower bound when the file lowers other rows too
        alone = np.bincount(p.step_of_row, weights=is_top, minlength=p.n_steps)[p.step_of_row] == 1
        headroom = np.where(is_top & alone, left - np.maximum(runner[p.step_of_row], 0.0), 0.0)
        gain = np.asarray(S.minimum(_rows_like(headroom, S)).sum(axis=0)).ravel()
        fits = (x == 0) & (sizes <= room)
        if not fits.any():
            break
        score = np.where(fits, gain / np.maximum(sizes, 1), -1.0)
        j = int(np.argmax(score))
        if score[j] <= 0:
            break
        x[j] = 1
        room -= int(sizes[j])
        left = left - np.asarray(S[:, j].todense()).ravel()
    order = np.argsort(-(savings / np.maximum(sizes, 1)), kind="stable")
    for j in order:                     # the rest of the room: by summed saving
        if x[j] == 0 and sizes[j] <= room and savings[j] > 0:
            x[j] = 1
            room -= int(sizes[j])
    return x


def _rows_like(values: np.ndarray, like):
    """A matrix shaped like `like` holding values[row] wherever `like` has an entry."""
    m = like.tocoo(copy=True)
    m.data = values[m.row]
    return m.tocsr()


def report(plans: Optional[Dict]) -> str:
    """The plans in words, for the text report and the tab."""
    if not plans:
        return ""
    from tfdarshan.advice.file_table import human_bytes, human_time
    cp, tot = plans["critical_path"], plans["total"]
    chosen = "critical-path" if plans["objective"] == "critical-path" else "total"
    return (f"Planned for a synchronous job of {plans['ranks']} ranks (--objective {chosen}): each step waits for "
            f"its slowest rank, whose expected file I/O summed over {plans['steps']} steps is "
            f"{human_time(plans['job_time'])} now. Critical-path plan (minimise the slowest rank's time, step by "
            f"step): {cp['files']} files, {human_bytes(cp['bytes'])}, saves {human_time(cp['job_saving'])} of job "
            f"time ({human_time(cp['summed_saving'])} summed over ranks). Total plan (most I/O time summed over "
            f"ranks): {tot['files']} files, {human_bytes(tot['bytes'])}, saves {human_time(tot['job_saving'])} of "
            f"job time ({human_time(tot['summed_saving'])} summed over ranks). Solved by {plans['solver']}. "
            f"Ranks are taken to compute alike.")
