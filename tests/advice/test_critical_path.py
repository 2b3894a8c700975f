"""The plan for many-rank jobs (advice/critical_path.py over job_time.py's
model): it minimises the job's time, per rank its training time (ranks at
their own pace) or per step the slowest rank's (ranks in lockstep). On
small random instances of both kinds SciPy's milp (HiGHS) finds the optimum
an exhaustive search finds, the greedy fallback never does worse than
staging nothing, and no plan is worse in job time than a rule it is
compared with; beyond the budget the greedy rule is used and said. On four
real ranks (their times rebuilt from their counts, so that the machine's
load cannot reorder them) where rank 3 reads five times the others' bytes
and the room is under half of rank 3's shard, `recommend` stages rank 3's
files by default, reports the rules beside it in job time, and
`--objective total` stages the summed plan instead."""
import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from rank_session import Cost, real_session, retime
from tfdarshan.advice import critical_path as CP
from tfdarshan.advice import job_time
from tfdarshan.advice import tiers as T


def instance(rng, files=7, ranks=4, steps=3, lockstep=False):
    """Costs, step files and steps: each (rank, step) lasts its compute plus
    the expected time of its reads (one thread: its wall time is that sum);
    in lockstep every rank's step lasts as long as the step's longest."""
    costs = pd.DataFrame({"path": [f"/d/f{i}" for i in range(files)], "size": rng.integers(1, 10, files) * 1000,
                          "saving": rng.random(files), "meta_unit": 0.0, "read_unit": rng.random(files) + 1.0})
    costs["saving"] = np.minimum(costs["saving"], costs["read_unit"])     # a read saves at most what it costs
    rows = []
    for f in range(files):
        for r in rng.choice(ranks, rng.integers(1, ranks + 1), replace=False):
            for t in range(steps):
                if rng.random() < 0.7:
                    rows.append({"path": f"/d/f{f}", "host": f"r{r}", "step": t, "module": "POSIX", "opens": 0,
                                 "stats": 0, "reads": int(rng.integers(1, 5))})
    sf = pd.DataFrame(rows)
    io = (sf.assign(t=costs.set_index("path")["read_unit"].reindex(sf["path"]).to_numpy() * sf["reads"])
          .groupby(["host", "step"])["t"].sum())
    cells = []
    for r in range(ranks):
        for t in range(steps):
            w = float(io.get((f"r{r}", t), 0.0))
            cells.append({"host": f"r{r}", "step": t, "wait": w, "compute": 0.5 + rng.random()})
    st = pd.DataFrame(cells)
    st["length"] = st["compute"] + st["wait"]
    if lockstep:
        st["length"] = st.groupby("step")["length"].transform("max")
    start = st.groupby("host")["length"].cumsum() - st["length"]
    steps_df = pd.DataFrame({"host": st["host"], "step": st["step"], "start": start, "end": start + st["length"],
                             "read_time": st["wait"], "meta_time": 0.0, "io_wall": st["wait"]})
    return costs, sf, steps_df


def exhaustive(jm, sizes, cap):
    n = len(sizes)
    return min(jm.job_time(np.array(x, float)) for x in itertools.product([0, 1], repeat=n)
               if np.dot(x, sizes) <= cap)


@pytest.mark.parametrize("lockstep", [False, True])
@pytest.mark.parametrize("seed", range(8))
def test_milp_finds_the_optimum_and_greedy_never_loses(seed, lockstep):
    rng = np.random.default_rng(seed)
    costs, sf, steps = instance(rng, lockstep=lockstep)
    jm = job_time.model(costs, steps, sf, np.arange(len(costs)))
    assert jm.mode == (job_time.LOCKSTEP if lockstep else job_time.OWN_PACE)
    cap = int(costs["size"].sum() // 3)
    sizes = costs["size"].to_numpy()
    out = CP.plan(costs, jm, np.ones(len(costs), bool), cap, {})
    best = exhaustive(jm, sizes, cap)
    assert "HiGHS" in out["solver"] and "optimal" in out["solver"], out["solver"]
    assert out["job_time"] - out["critical_path"]["job_saving"] == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert sizes[out["chosen"]].sum() <= cap
    # the job now, from the steps with pandas: the slowest rank's training time, or per step the slowest rank's
    length = steps["end"] - steps["start"]
    now = (length.groupby(steps["step"]).max().sum() if lockstep else length.groupby(steps["host"]).sum().max())
    assert out["job_time"] == pytest.approx(now, rel=1e-9)
    g = CP._greedy(jm, sizes, costs["saving"].to_numpy(), cap)
    assert sizes @ g <= cap and best - 1e-12 <= jm.job_time(g) <= out["job_time"] + 1e-12


@pytest.mark.parametrize("lockstep", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_a_saving_never_exceeds_the_slowest_ranks_wait_nor_its_time(seed, lockstep):
    rng = np.random.default_rng(100 + seed)
    costs, sf, steps = instance(rng, files=6, lockstep=lockstep)
    # staging saves all of every read (a tier that costs nothing)
    costs["saving"] = costs["read_unit"]
    jm = job_time.model(costs, steps, sf, np.arange(len(costs)))
    saving = jm.saving(np.arange(len(costs)))
    length = steps["end"] - steps["start"]
    if lockstep:
        # each step: its length, of which the longest wait of any rank (the rank every other waits for)
        wait, time = steps.groupby("step")["io_wall"].max().sum(), length.groupby(steps["step"]).max().sum()
    else:
        slow = length.groupby(steps["host"]).sum().idxmax()
        wait, time = steps.loc[steps["host"] == slow, "io_wall"].sum(), length[steps["host"] == slow].sum()
    assert 0 <= saving <= wait + 1e-9 and saving <= time
    # ranks at their own pace: never below the next slowest rank's training time
    if not lockstep:
        assert jm.job_time(np.ones(len(costs))) >= sorted(length.groupby(steps["host"]).sum())[-2] - 1e-9


def test_beyond_the_budget_the_greedy_rule_is_used_said_and_never_loses_to_a_rule(monkeypatch):
    rng = np.random.default_rng(3)
    costs, sf, steps = instance(rng, files=12)
    monkeypatch.setattr(CP, "MILP_CELLS", 5)
    cap = int(costs["size"].sum() // 3)
    jm = job_time.model(costs, steps, sf, np.arange(len(costs)))
    # rules: the files by summed saving per byte, and every single file that fits
    order = np.argsort(-costs["saving"].to_numpy() / costs["size"].to_numpy())
    fits = order[np.cumsum(costs["size"].to_numpy()[order]) <= cap]
    rules = {"total": fits, **{f"one{i}": np.array([i]) for i in range(len(costs)) if costs["size"][i] <= cap}}
    out = CP.plan(costs, jm, np.ones(len(costs), bool), cap, rules)
    assert out["solver"].startswith("greedy") and "budget" in out["solver"]
    assert costs["size"].to_numpy()[out["chosen"]].sum() <= cap
    assert 0 <= out["critical_path"]["job_saving"] <= out["job_time"]
    cp = out["critical_path"]
    for name, idx in rules.items():
        assert cp["job_saving"] >= jm.saving(idx) - tie_break_worth(cp) - 1e-12, name


def tie_break_worth(f):
    """At most what the tie-break may trade job time for: a plan's files
    valued at their summed saving plus the straggler's, weighted as the
    solver weighs them."""
    return CP.TIE_BREAK * (f["summed_saving"] + CP.SLOWEST_FIRST * f["straggler_saving"])


def test_a_rank_the_load_made_slowest_does_not_displace_the_stragglers_files():
    """CI once staged none of the slow rank's files: the machine's load made
    a fast rank the slowest by a hair, staging its files took microseconds
    off the job, and the rule "files under 2 MB" (its files) replaced the
    plan. Rank s waits 0.4 s on input; rank f computes 0.01 s longer."""
    costs = pd.DataFrame({"path": [f"/slow/s{i}" for i in range(4)] + [f"/local/f{i}" for i in range(4)],
                          "size": [1000] * 8, "saving": [0.1] * 4 + [25e-6] * 4, "meta_unit": 0.0,
                          "read_unit": [0.1] * 4 + [30e-6] * 4})
    sf = pd.DataFrame([{"path": p, "host": h, "step": 0, "module": "POSIX", "opens": 0, "stats": 0, "reads": 1}
                       for p, h in zip(costs["path"], ["s"] * 4 + ["f"] * 4)])
    steps = pd.DataFrame({"host": ["s", "f"], "step": [0, 0], "start": [0.0, 0.0], "end": [1.0, 1.01],
                          "read_time": [0.4, 120e-6], "meta_time": 0.0, "io_wall": [0.4, 120e-6]})
    jm = job_time.model(costs, steps, sf, np.arange(8), mode=job_time.OWN_PACE)
    fast_ranks_files = np.arange(4, 8)
    out = CP.plan(costs, jm, np.ones(8, bool), 4000, {"under_2mb": fast_ranks_files})
    assert sorted(costs["path"][out["chosen"]]) == [f"/slow/s{i}" for i in range(4)]
    cp, rule = out["critical_path"], out["rules"]["under_2mb"]
    # rank f stays the slowest: the straggler's files take nothing off the job, rank f's files 4 x 25 us
    assert cp["job_saving"] == 0.0 and rule["job_saving"] == pytest.approx(4 * 25e-6, rel=1e-6)
    assert cp["straggler_saving"] == pytest.approx(0.4, rel=1e-6)
    assert rule["job_saving"] - cp["job_saving"] <= tie_break_worth(cp)
    text = CP.report(out)
    assert "files under 2 MB would shorten the job more than the critical-path plan, by at most 100 µs" in text
    assert "the rank that waited longest on input (400.0 ms by the plan)" in text


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
    # times from counts: 1 ms an open, 2 ms a read request, 10 ms of compute a step
    retime(d, {T.point_of(str(data)): Cost(0.001, 0.002, 1e9)}, compute=0.010)
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
    # the rules, in the same measure (job time), and who wins
    assert set(plans["rules"]) == {"total", "under_2mb", "largest_time_first"}
    for rule in plans["rules"].values():
        assert cp["job_saving"] >= rule["job_saving"] - 1e-12
    assert a["job"]["savings"]["chosen"] == pytest.approx(cp["job_saving"], rel=1e-12)
    text = recommend(skewed)
    assert "Critical-path plan" in text and "Rule 'the most I/O time summed over ranks'" in text
    assert "of job time" in text and ("more than every rule" in text or "as much as" in text)


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


def _clocked(ends_by_rank, origin=1.8e9):
    """Steps of ranks whose step t ends at ends_by_rank[r][t] (seconds after origin)."""
    rows = []
    for r, ends in enumerate(ends_by_rank):
        start = 0.0
        for t, end in enumerate(ends):
            rows.append({"host": f"r{r}", "step": t, "start": start, "end": end, "read_time": 0.0, "meta_time": 0.0,
                         job_time.ORIGIN: origin})
            start = end
    return pd.DataFrame(rows)


def test_lockstep_is_read_from_when_steps_end_not_from_how_long_they_last():
    rng = np.random.default_rng(7)
    # a barrier each step: the ranks' steps end within a few ms, though each step's length varies by rank
    # (a rank scheduled late records its end late)
    common = np.cumsum(0.15 + 0.05 * rng.random(10))
    sync = _clocked([common + 0.05 * rng.random(10) for _ in range(4)])
    lengths = (sync["end"] - sync["start"]).groupby(sync["step"]).agg(["max", "min"])
    assert ((lengths["max"] - lengths["min"]) / lengths["max"]).median() > job_time.LOCKSTEP_LENGTHS
    assert job_time.mode_of(job_time.step_cells(sync)) == job_time.LOCKSTEP
    # own pace: the same steps, but rank 3 takes 80 ms longer each step and falls further behind
    apart = _clocked([np.cumsum(np.full(10, 0.15))] * 3 + [np.cumsum(np.full(10, 0.23))])
    assert job_time.mode_of(job_time.step_cells(apart)) == job_time.OWN_PACE
    # without the logs' clocks, steps that last alike are taken for lockstep
    alike = _clocked([np.cumsum(np.full(10, 0.15))] * 4).drop(columns=[job_time.ORIGIN])
    assert job_time.mode_of(job_time.step_cells(alike)) == job_time.LOCKSTEP
