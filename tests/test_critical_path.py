"""The plan for synchronous many-rank jobs (advice/critical_path.py): it
minimises the slowest rank's expected file I/O, step by step. On small
random instances SciPy's milp (HiGHS) finds the optimum an exhaustive
search finds, and the greedy fallback never does worse than staging
nothing; beyond the budget the greedy rule is used and said. On four real
ranks where rank 3 reads five times the others' bytes and the room is
under half of rank 3's shard, `recommend` stages rank 3's files by default
(once it staged the fast ranks' files and none of rank 3's), reports the
summed-over-ranks plan beside it with what each saves in job time, and
`--objective total` stages that one instead."""
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from rank_session import real_session
from tfdarshan.advice import critical_path as CP


def instance(rng, files=7, ranks=4, steps=3):
    costs = pd.DataFrame({"path": [f"/d/f{i}" for i in range(files)], "size": rng.integers(1, 10, files) * 1000,
                          "saving": rng.random(files), "meta_unit": 0.0, "read_unit": rng.random(files)})
    rows = []
    for f in range(files):
        for r in rng.choice(ranks, rng.integers(1, ranks + 1), replace=False):
            for t in range(steps):
                if rng.random() < 0.7:
                    rows.append({"path": f"/d/f{f}", "host": f"r{r}", "step": t, "module": "POSIX", "opens": 0,
                                 "stats": 0, "reads": int(rng.integers(1, 5))})
    return costs, pd.DataFrame(rows)


def exhaustive(problem, sizes, cap):
    n = len(sizes)
    return min(problem.job_time(np.array(x, float)) for x in itertools.product([0, 1], repeat=n)
               if np.dot(x, sizes) <= cap)


@pytest.mark.parametrize("seed", range(12))
def test_milp_finds_the_optimum_and_greedy_never_loses(seed):
    rng = np.random.default_rng(seed)
    costs, sf = instance(rng)
    cells = CP.cells_of(costs, sf)
    cap = int(costs["size"].sum() // 3)
    sizes = costs["size"].to_numpy()
    out = CP.plan(costs, cells, np.ones(len(costs), bool), cap, np.zeros(0, np.int64))
    p = CP.Problem(costs, cells, np.arange(len(costs)))
    best = exhaustive(p, sizes, cap)
    assert "HiGHS" in out["solver"] and "optimal" in out["solver"], out["solver"]
    assert out["job_time"] - out["critical_path"]["job_saving"] == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert sizes[out["chosen"]].sum() <= cap
    # the job's I/O now: per step the slowest rank's expected time, summed, from the cells
    per = cells.groupby(["step", "process"])["expected"].sum().groupby("step").max().sum()
    assert out["job_time"] == pytest.approx(per, rel=1e-9)
    g = CP._greedy(p, sizes, costs["saving"].to_numpy(), cap)
    assert sizes @ g <= cap and best - 1e-12 <= p.job_time(g) <= out["job_time"] + 1e-12


def test_beyond_the_budget_the_greedy_rule_is_used_and_said(monkeypatch):
    rng = np.random.default_rng(3)
    costs, sf = instance(rng, files=12)
    monkeypatch.setattr(CP, "MILP_CELLS", 5)
    cap = int(costs["size"].sum() // 3)
    out = CP.plan(costs, CP.cells_of(costs, sf), np.ones(len(costs), bool), cap, np.zeros(0, np.int64))
    assert out["solver"].startswith("greedy") and "budget" in out["solver"]
    assert costs["size"].to_numpy()[out["chosen"]].sum() <= cap
    assert 0 <= out["critical_path"]["job_saving"] <= out["job_time"]


SCRIPT = """
import os, sys, tfdarshan
rank = int(os.environ["SLURM_PROCID"])
data = sys.argv[1]
mine = sorted(f for f in os.listdir(data) if f.startswith("r%d_" % rank))
for step in range(3):
    with tfdarshan.step(step):
        for f in mine:
            with open(os.path.join(data, f), "rb") as fh:
                fh.read()
"""
SHARD = 200_000


@pytest.fixture(scope="module")
def skewed(tmp_path_factory):
    """Ranks 0-2 read one 200 kB file a step; rank 3 reads five."""
    root = tmp_path_factory.mktemp("skewed")
    data = root / "data"
    data.mkdir()
    for r in range(4):
        for i in range(5 if r == 3 else 1):
            (data / f"r{r}_{i}.bin").write_bytes(os.urandom(SHARD))
    d = real_session(root, SCRIPT, [data], 4)
    fast = root / "fast"
    fast.mkdir()
    toml = root / "tiers.toml"
    toml.write_text(f'[[tier]]\npath = "{fast}"\nname = "fast"\ncapacity = "1G"\nbandwidth = "100G"\n'
                    f'read_latency = 1e-6\nopen_latency = 1e-6\n')
    return d, data, fast, toml


def recommend(skewed, *extra):
    d, _, fast, toml = skewed
    # room for two of rank 3's five files: under half of its shard
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(d), "--fast-tier", str(fast), "--tiers",
                        str(toml), "--capacity", f"{int(2.5 * SHARD)}B", "--no-store", *extra],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def test_the_default_plan_stages_the_slowest_ranks_files(skewed):
    _, data, _, _ = skewed
    a = json.loads(recommend(skewed, "--format", "json"))
    staged = [f["path"] for f in a["files"]]
    assert len(staged) == 2 and all(os.path.basename(p).startswith("r3_") for p in staged), staged
    plans = a["plans"]
    assert plans["objective"] == "critical-path" and plans["ranks"] == 4 and plans["steps"] == 3
    cp, total = plans["critical_path"], plans["total"]
    assert cp["files"] == 2 and cp["bytes"] == 2 * SHARD
    # what staging takes off the critical path: at least what the summed plan takes off it
    assert cp["job_saving"] >= total["job_saving"] - 1e-12
    assert 0 < cp["job_saving"] <= cp["summed_saving"] + 1e-12 and cp["job_saving"] <= plans["job_time"]
    # rank 3 stays the slowest after staging two of its five equal files: every second they save is the job's
    assert cp["job_saving"] == pytest.approx(cp["summed_saving"], rel=1e-9)
    text = recommend(skewed)
    assert "Critical-path plan" in text and "Total plan" in text and "of job time" in text


def test_objective_total_stages_the_summed_plan(skewed):
    a = json.loads(recommend(skewed, "--format", "json", "--objective", "total"))
    plans = a["plans"]
    assert plans["objective"] == "total"
    assert {f["path"] for f in a["files"]} and len(a["files"]) == plans["total"]["files"]
    assert a["predicted_saving"] == pytest.approx(plans["total"]["summed_saving"], rel=1e-9)


def test_without_step_series_the_window_is_one_step(skewed, tmp_path):
    # the same logs, imported without their series: each rank's window is its one step
    d, _, fast, toml = skewed
    bare = tmp_path / "logs" / "plugins" / "tfdarshan" / d.name
    bare.mkdir(parents=True)
    for log in d.glob("*.rank*.darshan"):
        (bare / log.name).write_bytes(log.read_bytes())
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(bare), "--fast-tier", str(fast), "--tiers",
                        str(toml), "--capacity", f"{int(2.5 * SHARD)}B", "--no-store", "--format", "json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    a = json.loads(r.stdout)
    assert a["plans"]["steps"] == 1 and a["plans"]["objective"] == "critical-path"
    assert all(os.path.basename(f["path"]).startswith("r3_") for f in a["files"]) and len(a["files"]) == 2
