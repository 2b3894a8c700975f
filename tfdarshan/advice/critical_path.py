"""Staging for many-rank jobs: the plan that shortens the job.

The job's time, and what staging takes off it, come from job_time.py: per
rank and step the measured step length and input wait (wall time), and
what staging each file takes off that wait. The critical-path plan picks
the files (0/1, within the capacity) that minimise that job time, J(x): a
small mixed-integer program (a variable per file, one per block of rows:
z_b >= each row's time left), solved by SciPy's `milp` (HiGHS) within a
time and size budget, by a greedy rule beyond it (take the file that
lowers J most per byte, by how much it shortens each block's slowest row
before the next slowest one takes over). Among plans that shorten the job
alike, the one saving the most time in calls wins (a small tie-break), so
once the slowest rank is no longer the slowest, its remaining files still
come before the other ranks'. The simple rules (the plan that saves the
most I/O time summed over ranks, "largest I/O time first", "files under
2 MB") are measured in the same job time; the plan is never worse than
any of them in the solver's measure (job time, then the tie-break): a rule
that scores higher replaces it, and says so. A rule ahead by less than the
tie-break is worth (a fast rank made the slowest by the machine's load,
microseconds off its steps) does not displace the straggler's files; the
report names it and by how much."""
from __future__ import annotations

import time
from typing import Dict, Optional

import numpy as np

from tfdarshan.advice.job_time import JobModel

MILP_CELLS = 200_000        # nonzero (file, row) savings the exact program takes
MILP_FILES = 20_000
MILP_SECONDS = 10.0         # HiGHS' time limit; its best plan so far is used past it
TIE_BREAK = 1e-4            # among equally short jobs: the plan saving the straggler most, then most in calls
SLOWEST_FIRST = 100.0       # a second off the straggler's wait (job_time.py) is worth this many in calls
MIP_GAP = 1e-9              # HiGHS' relative gap: the default (1e-4) is as large as the tie-break
GREEDY_ROUNDS = 5_000       # past this many picks the greedy fills by summed saving per byte
RULES = {"total": "the most I/O time summed over ranks", "largest_time_first": "largest I/O time first",
         "under_2mb": "files under 2 MB"}


def plan(costs, jm: JobModel, stageable: np.ndarray, capacity: int, rules: Dict[str, np.ndarray],
         objective: str = "critical-path") -> Dict:
    """The critical-path plan and the rules' plans, each with its job-time
    and summed savings; "chosen" is the objective's (indices into costs).
    `rules` maps a rule's name (RULES) to its files; "total" is the
    objective of that name."""
    sizes = costs["size"].to_numpy(np.int64)
    savings = costs["saving"].to_numpy(np.float64)
    candidates = jm.candidates
    started = time.perf_counter()
    # per file (0 for a file no plan may stage): what staging it takes off the rank that waited longest, and
    # the tie-break's value of it: that first, then its saving in calls
    straggler = np.zeros(len(sizes))
    straggler[candidates] = jm.slowest_saving()
    value = np.zeros(len(sizes))
    value[candidates] = savings[candidates] + SLOWEST_FIRST * straggler[candidates]
    x, how = solve(jm, sizes[candidates], value[candidates], capacity)
    cp = np.sort(candidates[x > 0.5])
    now = jm.job_time(np.zeros(len(candidates)))

    def figures(chosen: np.ndarray) -> Dict:
        chosen = np.asarray(chosen, dtype=np.int64)
        return {"files": int(len(chosen)), "bytes": int(sizes[chosen].sum()),
                "job_saving": now - jm.job_time(jm.x_of(chosen)), "summed_saving": float(savings[chosen].sum()),
                "straggler_saving": float(straggler[chosen].sum())}

    def worth(f: Dict, chosen) -> float:
        """What the solver maximises: job time, then the tie-break (the straggler first, then calls)."""
        return f["job_saving"] + TIE_BREAK * float(value[np.asarray(chosen, dtype=np.int64)].sum())
    rule_figures = {name: figures(idx) for name, idx in rules.items()}
    # never worse than a rule in the solver's own measure (a heuristic's plan can lose to one); a rule
    # shortening the job by less than the tie-break is worth does not displace the straggler's files: once
    # the machine's load makes a fast rank the slowest, microseconds off it are no reason to leave them
    mine = figures(cp)
    best = max(rule_figures, key=lambda n: worth(rule_figures[n], rules[n]), default=None)
    if best is not None and worth(rule_figures[best], rules[best]) > worth(mine, cp) + 1e-12:
        cp, how = np.sort(np.asarray(rules[best], dtype=np.int64)), how + f"; {RULES.get(best, best)}: shorter"
        mine = figures(cp)
    out = {"objective": objective, "job_time": now, "steps": jm.steps, "ranks": jm.ranks, "solver": how,
           "solve_seconds": time.perf_counter() - started, "model": jm.to_dict(),
           "critical_path": mine, "rules": rule_figures, "total": rule_figures.get("total", figures([]))}
    out["chosen"] = cp if objective == "critical-path" else np.asarray(rules.get("total", []), dtype=np.int64)
    out["job_saving"] = (mine if objective == "critical-path" else out["total"])["job_saving"]
    return out


def solve(p: JobModel, sizes: np.ndarray, savings: np.ndarray, capacity: int):
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


def _milp(p: JobModel, sizes: np.ndarray, savings: np.ndarray, capacity: int):
    from scipy import sparse
    from scipy.optimize import Bounds, LinearConstraint, milp
    n, T = p.S.shape[1], p.n_blocks
    touched = np.diff(p.S.tocsr().indptr) > 0
    # rows no candidate touches only bound their block's z from below
    floor = np.zeros(T)
    np.maximum.at(floor, p.block_of_row[~touched], p.base[~touched])
    rows = np.nonzero(touched)[0]
    z = sparse.csr_matrix((np.ones(len(rows)), (np.arange(len(rows)), p.block_of_row[rows])), shape=(len(rows), T))
    A = sparse.hstack([p.S.tocsr()[rows], z]).tocsr()
    cap = sparse.csr_matrix(np.concatenate([sizes / capacity, np.zeros(T)])[None, :])
    constraints = [LinearConstraint(A, p.base[rows], np.inf), LinearConstraint(cap, -np.inf, 1.0)]
    c = np.concatenate([-TIE_BREAK * savings, np.ones(T)])
    res = milp(c, constraints=constraints, integrality=np.concatenate([np.ones(n), np.zeros(T)]),
               bounds=Bounds(np.concatenate([np.zeros(n), floor]), np.concatenate([np.ones(n), np.full(T, np.inf)])),
               options={"time_limit": MILP_SECONDS, "disp": False, "mip_rel_gap": MIP_GAP})
    if res.x is None:
        return None, res.message
    x = (res.x[:n] > 0.5).astype(np.float64)
    if sizes @ x > capacity:            # rounding of a near-integral answer must still fit
        return None, "its plan did not fit after rounding"
    return x, "optimal" if res.status == 0 else f"best found within {MILP_SECONDS:.0f} s"


def _greedy(p: JobModel, sizes: np.ndarray, savings: np.ndarray, capacity: int) -> np.ndarray:
    """Repeatedly the file that shortens the slowest rows most per byte; by
    summed saving per byte once no file shortens them."""
    n = len(sizes)
    x = np.zeros(n)
    room = int(capacity)
    S = p.S.tocsr()
    left = p.base.copy()
    for _ in range(min(n, GREEDY_ROUNDS)):
        worst = np.full(p.n_blocks, -np.inf)
        np.maximum.at(worst, p.block_of_row, left)
        is_top = left >= worst[p.block_of_row]
        # the next slowest row of each block (the top one's own value when it stands alone)
        runner = np.full(p.n_blocks, -np.inf)
        np.maximum.at(runner, p.block_of_row, np.where(is_top, -np.inf, left))
        runner = np.where(np.isfinite(runner), runner, 0.0)
        # a file's gain: for each block's slowest row (alone at the top), how far it lowers
        # it before the next takes over; a lower bound when the file lowers other rows too
        alone = np.bincount(p.block_of_row, weights=is_top, minlength=p.n_blocks)[p.block_of_row] == 1
        headroom = np.where(is_top & alone, left - np.maximum(runner[p.block_of_row], 0.0), 0.0)
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
    """The plans in words, for the text report and the tab: each in job time
    (the objective's measure), which one wins, and what the figures rest on."""
    if not plans:
        return ""
    from tfdarshan.advice import job_time
    from tfdarshan.measures.human import count, human_bytes, human_time
    cp, m = plans["critical_path"], plans["model"]
    chosen = "critical-path" if plans["objective"] == "critical-path" else "total"

    def one(f: Dict) -> str:
        return (f"{count(f['files'], 'file')}, {human_bytes(f['bytes'])}, saves {human_time(f['job_saving'])} of job time "
                f"({human_time(f['summed_saving'])} of I/O time summed over ranks)")
    rules = plans.get("rules", {})
    lines = [f"Planned for a job of {count(plans['ranks'], 'rank')} (--objective {chosen}): "
             f"{job_time.MODES[m['mode']]}; {human_time(plans['job_time'])} over {count(plans['steps'], 'step')} now, with "
             f"{job_time.WAITED[m['mode']]} {human_time(m['slowest_wait'])} ({m['bound']}).",
             f"Critical-path plan (the shortest job): {one(cp)}."]
    lines += [f"Rule {RULES.get(name, name)!r}: {one(f)}." for name, f in rules.items()]
    ahead = [RULES.get(n, n) for n, f in rules.items() if f["job_saving"] > cp["job_saving"] + 1e-9]
    even = [RULES.get(n, n) for n, f in rules.items() if abs(f["job_saving"] - cp["job_saving"]) <= 1e-9]
    if ahead:
        lines.append(f"{', '.join(ahead)} would shorten the job more than the critical-path plan, by at most "
                     f"{human_time(max(f['job_saving'] for f in rules.values()) - cp['job_saving'])}, but take"
                     f"{'s' if len(ahead) == 1 else ''} less off the rank that waited longest on input "
                     f"({human_time(cp.get('straggler_saving', 0.0))} by the plan): among plans this close in "
                     f"job time, that rank comes first.")
    elif even:
        lines.append(f"The critical-path plan shortens the job as much as {', '.join(even)}, and no rule more.")
    else:
        lines.append("The critical-path plan shortens the job more than every rule.")
    lines.append(f"Solved by {plans['solver']}. Each saving is {job_time.at_most(m)}; an upper bound where reads "
                 f"overlapped computation.")
    return "\n".join(lines)
