"""A job dies the way jobs die, and its profile survives, seen from the log
directory the user gave to `tfdarshan run`.

- Four ranks of a synchronous Keras job under a real `mpirun`: rank 3 is
  SIGKILLed mid-training, the others block in the batch's allreduce, and
  mpirun aborts them (SIGTERM, then SIGKILL 1 s later). Every rank's
  counters and step series are in the session `tfdarshan analyze LOGDIR`
  reads, up to the rank's last collect; `recommend LOGDIR` plans for all 4
  ranks and names the partial ones; the tab (headless Chromium) names them.
- One process SIGKILLed under `run`: `analyze LOGDIR`, `recommend LOGDIR`,
  `joblog`/`import` of the directory and the tab see its bytes.

Nothing here depends on timing: each rank writes the batch it finished (a
progress file, before tfdarshan's own callback collects), so the test knows
which files were read before the rank's last collect; each survivor may have
written its log on SIGTERM or been SIGKILLed first, and the assertions hold
either way (its log is then partial, and named so)."""
import json
import os
import socket
import subprocess
import sys
import urllib.parse

import pytest

import tfdarshan
from tfdarshan.analysis.analyze import read_table
from tfdarshan.capture import live
from tfdarshan.logs import live_series
from tfdarshan.logs.logdir import find_sessions, load_steps
from tfdarshan.steps.series import SETUP_STEP
from tb_helpers import browser, fetch, open_tab, show_run, tensorboard
from mpi_env import MPI_ENV, needs_mpi
from places import WORKERS

pytestmark = pytest.mark.cost(50)

HOST = socket.gethostname()
NRANKS, VICTIM, KILL_AT, FILES = 4, 3, 8, 20
BIG = 3_000_000 + 4321          # the single process's file
WAIT = 120
MPI_MISSING = needs_mpi.args[0]


def size_of(rank: int, i: int) -> int:
    """Every file of the job has a size of its own."""
    return 20_000 + 1_000 * rank + 13 * i


def cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "tfdarshan", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout)


# ---------------------------------------------------------------- the job
@pytest.fixture(scope="module")
def tb_root(tmp_path_factory):
    """The parent of both log directories: TensorBoard shows each as a run."""
    return tmp_path_factory.mktemp("killed")


@pytest.fixture(scope="module")
def job(tb_root):
    if MPI_MISSING:
        pytest.skip(needs_mpi.kwargs["reason"])
    data, out = tb_root / "data", tb_root / "progress"
    data.mkdir()
    out.mkdir()
    for r in range(NRANKS):
        for i in range(FILES):
            (data / f"r{r}_{i:03d}.bin").write_bytes(os.urandom(size_of(r, i)))
    logdir = tb_root / "job"
    p = subprocess.run(["mpirun", "-np", str(NRANKS), sys.executable, "-m", "tfdarshan", "run", "--logdir",
                        str(logdir), str(WORKERS / "killed_fit.py"), str(data), str(out), str(VICTIM),
                        str(KILL_AT)], env={**os.environ, **MPI_ENV}, capture_output=True, text=True, timeout=900)
    assert p.returncode != 0, "mpirun must report the killed rank"
    progress = {r: int((out / f"rank{r}.progress").read_text()) for r in range(NRANKS)}
    assert progress[VICTIM] == KILL_AT, (progress, p.stderr[-3000:])
    [d] = [x for x in (logdir / "plugins" / "tfdarshan").iterdir() if x.is_dir()]
    # which ranks wrote their own logs (on SIGTERM), before any reader touched the session
    wrote = {r for r in range(NRANKS) if (d / f"{HOST}.rank{r}.darshan").exists()}
    # (a rank SIGKILLed while writing may have written its coverage record, not its log)
    covered = {r for r in range(NRANKS) if (d / f"{HOST}.rank{r}.coverage.json").exists()}
    assert VICTIM not in wrote and (d / f"{HOST}.rank{VICTIM}{live.SUFFIX}").exists()
    assert (d / f"{HOST}.rank{VICTIM}{live_series.SUFFIX}").exists()
    a = cli("analyze", logdir)
    assert a.returncode == 0, a.stderr[-3000:]
    return {"logdir": logdir, "data": data, "progress": progress, "wrote": wrote, "covered": covered, "session": d,
            "analyze": a, "partial": sorted(set(range(NRANKS)) - wrote)}


@needs_mpi
def test_every_rank_is_in_the_session_analyze_reads_up_to_its_last_collect(job):
    d = job["session"]
    [s] = find_sessions(job["logdir"])
    assert s.directory == d and sorted(s.hosts) == sorted(f"{HOST}.rank{r}" for r in range(NRANKS))
    assert str(d) in job["analyze"].stdout
    for r, done in job["progress"].items():
        # batches before the last one reported were collected (begin and end of each step)
        collected = {str(job["data"] / f"r{r}_{i:03d}.bin"): size_of(r, i) for i in range(done)}
        snap = tfdarshan.read_darshan_log(d / f"{HOST}.rank{r}.darshan")
        p = snap.posix.set_index("path")
        for path, size in collected.items():
            assert (p.at[path, "POSIX_BYTES_READ"], p.at[path, "POSIX_OPENS"]) == (size, 1), (r, path)
        # nothing read that the rank never opened, nothing beyond its files
        mine = p[p.index.str.startswith(str(job["data"]))]
        assert set(mine.index) <= {str(job["data"] / f"r{r}_{i:03d}.bin") for i in range(FILES)}
        assert (mine["POSIX_BYTES_READ"] == [size_of(r, int(x[-7:-4])) for x in mine.index]).all()
        # the step series: Keras' steps 1..done (batch b is step b + 1) and the set-up before them hold
        # every collected file's bytes (prefetching reads a batch's file in an earlier step)
        steps, files = load_steps(s, f"{HOST}.rank{r}")
        assert set(range(1, done + 1)) <= set(steps["step"]), (r, sorted(steps["step"]))
        early = files[(files["step"] == SETUP_STEP) | files["step"].between(1, done)]
        got = early.groupby("path")["bytes_read"].sum()
        assert {k: int(got.get(k, 0)) for k in collected} == collected, r
        partial = "partial" in snap.meta["job_metadata"]
        assert partial == (r not in job["wrote"]), r
    # the analysis tables count every rank, the partial ones named as such
    ranks = read_table(d, "ranks").set_index("rank")
    assert sorted(ranks.index) == list(range(NRANKS))
    assert sorted(ranks.index[ranks["partial"]]) == job["partial"]
    assert ranks["input_wait_share"].notna().all(), ranks["input_wait_share"]
    for r, done in job["progress"].items():
        assert ranks.at[r, "bytes_read"] >= sum(size_of(r, i) for i in range(done))
    assert f"{len(job['partial'])} partial" in job["analyze"].stdout


@needs_mpi
def test_recommend_plans_for_every_rank_and_names_the_partial_ones(job):
    r = cli("recommend", job["logdir"], "--fast-tier", "/dev/shm", "--capacity", "1GiB", "--format", "json",
            "--no-store")
    assert r.returncode == 0, r.stderr[-3000:]
    advice = json.loads(r.stdout)
    assert advice["plans"]["ranks"] == NRANKS
    assert advice["plans"]["partial_ranks"] == [f"{HOST} rank {x}" for x in job["partial"]]
    [finding] = [f for f in advice["findings"] if "partial" in f["title"]]
    assert finding["title"].startswith(f"{len(job['partial'])} of {NRANKS} logs partial")
    assert [p["label"] for p in finding["evidence"]["partial_logs"]] == [f"{HOST} rank {x}" for x in job["partial"]]
    # every rank's files read inside its steps, the killed rank's too, are training input: the simple
    # rule, with room for all, takes every one of them (and none is left out as read outside the steps)
    collected = sum(size_of(r, i) for r, done in job["progress"].items() for i in range(done))
    assert advice["baselines"]["largest_time_first"]["bytes"] >= collected, advice["baselines"]
    outside = [g for g in advice["left_out"] if g["reason"].startswith("read only outside")]
    assert not any(str(job["data"]) in e for g in outside for e in g["examples"]), outside
    # the straggler finding judges every rank, the partial ones too (as its rule reads the tables)
    ranks = read_table(job["session"], "ranks").set_index("rank")
    median = ranks["input_wait_share"].median()
    slow = ranks.index[(ranks["input_wait_share"] >= 1.5 * median) & (ranks["input_wait_share"] >= median + 0.10)]
    stragglers = [f for f in advice["findings"] if "straggling" in f["title"]]
    assert bool(len(slow)) == bool(stragglers)
    if stragglers:
        assert sorted(int(k) for k in stragglers[0]["evidence"]["stragglers"]) == sorted(slow)


@needs_mpi
def test_joblog_and_import_take_the_log_directory(job, tmp_path):
    j = cli("joblog", job["logdir"])
    assert j.returncode == 0, j.stderr
    assert f"{NRANKS} of {NRANKS} ranks" in j.stdout
    if job["partial"]:
        # "partial: ranks 0-2, 5, ended ...": the ranks as ranges
        said = j.stdout.split("partial: rank")[1].lstrip("s ").split(", ended")[0]
        named = set()
        for part in said.split(", "):
            lo, _, hi = part.partition("-")
            named.update(range(int(lo), int(hi or lo) + 1))
        assert named == set(job["partial"]), j.stdout
    i = cli("import", job["logdir"], "--logdir", tmp_path / "imported")
    assert i.returncode == 0, i.stderr
    [s] = find_sessions(tmp_path / "imported")
    assert sorted(s.hosts) == sorted(f"{HOST}.rank{r}" for r in range(NRANKS)) and s.job_log
    steps, _ = load_steps(s, f"{HOST}.rank{VICTIM}")
    assert set(range(1, KILL_AT + 1)) <= set(steps["step"])


# ---------------------------------------------------- one process, killed
SOLO = """
import os, signal, sys, tfdarshan
big, other = sys.argv[1], sys.argv[2]
with open(big, "rb") as f:
    for step in range(3):                 # a custom loop: each step reads a third of the file
        with tfdarshan.step(step):
            f.read(-(-os.path.getsize(big) // 3))
with tfdarshan.step(3):                   # killed mid-step: what it read since the step began is lost
    with open(other, "rb") as g:
        g.read()
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="module")
def solo(tb_root):
    big, other = tb_root / "big.bin", tb_root / "other.bin"
    big.write_bytes(os.urandom(BIG))
    other.write_bytes(os.urandom(12_345))
    script = tb_root / "solo.py"
    script.write_text(SOLO)
    logdir = tb_root / "solo"
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(script), str(big),
                        str(other)], capture_output=True, text=True, timeout=300)
    assert p.returncode == -9, p.stderr[-3000:]
    assert not list(logdir.rglob("*.darshan")) and len(list(logdir.rglob("*" + live.SUFFIX))) == 1
    return {"logdir": logdir, "big": big, "other": other}


def test_a_killed_process_is_seen_from_its_log_directory(solo, tmp_path):
    a = cli("analyze", solo["logdir"])
    assert a.returncode == 0, a.stderr
    assert "converted 1 live log" in a.stderr and "1 partial" in a.stdout
    [s] = find_sessions(solo["logdir"])
    files = read_table(s.directory, "files").set_index("path")
    assert files.at[str(solo["big"]), "bytes_read"] == BIG
    # the last step's read came after the last collect (nothing but a step boundary collects here)
    assert files["bytes_read"].get(str(solo["other"]), 0) in (0, 12_345)
    steps, step_files = load_steps(s)
    per_step = step_files[step_files["path"] == str(solo["big"])].groupby("step")["bytes_read"].sum()
    assert per_step.loc[[0, 1, 2]].sum() == BIG and not per_step.drop([0, 1, 2]).any(), per_step
    r = cli("recommend", solo["logdir"], "--fast-tier", "/dev/shm", "--capacity", "1GiB", "--format", "json",
            "--no-store")
    assert r.returncode == 0, r.stderr
    advice = json.loads(r.stdout)
    # its file is training input (read inside its steps): the simple rule, with room for all, takes it whole
    rule = advice["baselines"]["largest_time_first"]
    assert (rule["files"], rule["bytes"]) in ((1, BIG), (2, BIG + 12_345)), rule
    assert any("1 of 1 log partial" in f["title"] for f in advice["findings"])
    i = cli("import", solo["logdir"], "--logdir", tmp_path / "imported")
    assert i.returncode == 0, i.stderr
    [copy] = find_sessions(tmp_path / "imported")
    assert tfdarshan.read_darshan_log(copy.directory / f"{s.hosts[0]}.darshan").posix.set_index("path").at[
        str(solo["big"]), "POSIX_BYTES_READ"] == BIG


# ------------------------------------------------------------------ the tab
def _query(logdir, name):
    [s] = [s for s in find_sessions(logdir) if s.run == name]
    return {"run": s.run, "session": s.name}


@pytest.fixture(scope="module")
def server(tb_root, solo):
    with tensorboard(tb_root) as url:
        yield url


def _summary(url, params):
    status, _, body = fetch(url, f"/data/plugin/tfdarshan/summary?{urllib.parse.urlencode(params)}")
    assert status == 200, body[:500]
    return json.loads(body)


def test_the_tab_names_partial_logs(server, tb_root, solo, request):
    from selenium.webdriver.common.by import By
    job_ = None if MPI_MISSING else request.getfixturevalue("job")
    # (the tab converts a live log itself when no command did: the solo run was analysed above, or not)
    solo_q = _query(tb_root, "solo")
    summary = _summary(server, solo_q)
    assert summary["bytes_read"] >= BIG and [p["label"] for p in summary["partial_logs"]] == [HOST]
    d = browser()
    try:
        open_tab(d, server, timeout=WAIT)

        def show(run, chart):
            show_run(d, run, chart, "tfd-partial", timeout=WAIT)
            return d.find_element(By.ID, "tfd-partial").text

        note = show("solo", "tfd-hist")
        assert "1 process ended without writing its log" in note and f"{HOST}: partial, killed" in note
        if job_ is not None:
            q = _query(tb_root, "job")
            summary = _summary(server, q)
            assert summary["ranks"] == NRANKS
            assert [p["log"] for p in summary["partial_logs"]] == [f"{HOST}.rank{x}" for x in job_["partial"]]
            note = show("job", "tfd-rank-wait")
            n = len(job_["partial"])
            assert f"{n} rank{'s' if n > 1 else ''} ended without writing" in note
            for x in job_["partial"]:
                assert f"{HOST} rank {x}: partial" in note
            bars = d.execute_script("return Array.from(document.getElementById('tfd-rank-wait').data[0].x)")
            assert sorted(bars) == sorted(f"{x} (partial)" if x in job_["partial"] else str(x)
                                          for x in range(NRANKS))
            # the coverage card adds up the ranks with coverage records (a rank killed before writing has
            # none), and says how many of the job's
            cards = d.find_element(By.ID, "tfd-summary").text
            covered = len(job_["covered"])
            if 0 < covered < NRANKS:
                assert f"({covered} of {NRANKS} ranks added up" in cards, cards
            elif covered == 0:
                assert "added up" not in cards, cards
        severe = [e for e in d.get_log("browser") if e["level"] == "SEVERE"]
        assert not severe, severe
    finally:
        d.quit()
