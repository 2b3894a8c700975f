"""Runs never mix: every launcher's re-run into the same log directory gets
a session of its own, whole, which the tab lists; the ranks of one run
still meet in one session, agreed through the log directory alone.

Each launcher is run as it runs (a real mpirun, a real torchrun when torch
is installed) or, where it cannot run here (Slurm), with the variables its
documentation says it sets. Every run reads files of its own, so a session
holding another run's ranks, or missing one of its own, is seen."""
import importlib.util
import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
import threading
import time

import pytest
from tensorboard.plugins.base_plugin import TBContext
from werkzeug.test import Client

import tfdarshan
from tfdarshan.capture import ranks
from tfdarshan.logs import jobdir
from tfdarshan.logs.logdir import find_sessions
from places import WORKERS

WORKER = WORKERS / "run_member.py"
HOST = socket.gethostname()
MPI_ENV = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
           "OMPI_MCA_rmaps_base_oversubscribe": "1"}
needs_mpirun = pytest.mark.skipif(not shutil.which("mpirun"), reason="needs Open MPI's mpirun (openmpi-bin)")
TORCHRUN = pathlib.Path(sys.executable).parent / "torchrun"
needs_torchrun = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or not TORCHRUN.exists(),
    reason="needs torch's torchrun (not a tfdarshan dependency: pip install torch to run this)")


# ------------------------------------------------------------ the runs
def make_data(root: pathlib.Path, runs, nranks: int):
    """{run: {rank: {path: size}}}: a file a rank and one the run's ranks
    share, of sizes no other run or rank has."""
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for k, run in enumerate(runs):
        shared = root / f"{run}_shared.bin"
        shared.write_bytes(os.urandom(50_000 + 1000 * k))
        out[run] = {}
        for r in range(nranks):
            own = root / f"{run}_rank{r}.bin"
            own.write_bytes(os.urandom(1000 * (k + 1) + 100 * r + 7))
            out[run][r] = {str(own): own.stat().st_size, str(shared): shared.stat().st_size}
    return out


def member(logdir, data, run, rank, size, barrier):
    """`tfdarshan run` of one rank; `rank` is its number, or the variable the launcher puts it in."""
    return [sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(WORKER), str(data), run,
            str(rank), str(size), str(barrier)]


def start_ranks(envs, logdir, data, run, tmp_path):
    """One process a rank, started together, each with its launcher's variables."""
    barrier = tmp_path / "barriers" / run
    fallback = {"TFDARSHAN_FALLBACK_DIR": str(tmp_path / "fallback")}     # (where logs go that a session refused)
    return [subprocess.Popen(member(logdir, data, run, r, len(envs), barrier), env={**os.environ, **fallback, **env},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for r, env in enumerate(envs)]


def finish(procs):
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]


def read_files(log: pathlib.Path, data: pathlib.Path):
    """{path: bytes read} of the data files in one rank's log."""
    p = tfdarshan.read_darshan_log(log).posix
    p = p[p["path"].str.startswith(str(data) + os.sep)]
    return {path: int(n) for path, n in zip(p["path"], p["POSIX_BYTES_READ"])}


def job_nprocs(log: pathlib.Path) -> int:
    import darshan          # PyDarshan, a reader of our own
    with darshan.DarshanReport(str(log), read_all=False) as rep:
        return int(rep.metadata["job"]["nprocs"])


def assert_each_run_whole(logdir: pathlib.Path, data: pathlib.Path, expected):
    """One session a run, holding exactly that run's ranks and their files,
    with its job log; and the tab lists them all."""
    sessions = find_sessions(logdir)
    assert len(sessions) == len(expected), [(s.name, s.hosts) for s in sessions]
    found = {}
    for s in sessions:
        nranks = len(next(iter(expected.values())))
        assert list(s.hosts) == [f"{HOST}.rank{r}" for r in range(nranks)], (s.name, s.hosts)
        got = {r: read_files(s.directory / f"{HOST}.rank{r}.darshan", data) for r in range(nranks)}
        run = next(run for run, want in expected.items() if got[0] == want[0])
        assert run not in found, f"two sessions hold run {run}"
        assert got == expected[run], s.name
        assert s.job_log and job_nprocs(s.directory / s.job_log) == nranks
        found[run] = s
    assert set(found) == set(expected)
    # the tab's selector lists every run's session, with its ranks
    from tfdarshan_tb.plugin import IOPlugin
    plugin = IOPlugin(TBContext(logdir=str(logdir)))
    r = Client(plugin.get_plugin_apps()["/runs"]).get("/")
    assert r.status_code == 200
    listed = [(x["session"], x["ranks"]) for run in json.loads(r.get_data())["runs"] for x in run["sessions"]]
    assert sorted(listed) == sorted((s.name, len(s.hosts)) for s in sessions)
    return found


# ------------------------------------------------------ TF_CONFIG, twice
def tf_config_envs(ports):
    cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    return [{"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
            for i in range(len(ports))]


def test_two_tf_config_runs_into_one_log_directory_give_two_whole_sessions(tmp_path):
    # the same TF_CONFIG both times, as a re-run of a job has
    runs = ["first", "second"]
    expected = make_data(tmp_path / "data", runs, 2)
    logdir = tmp_path / "logs"
    envs = tf_config_envs([23456, 23457])
    for run in runs:
        finish(start_ranks(envs, logdir, tmp_path / "data", run, tmp_path))
    assert {ranks.detect(e).job for e in envs} == {ranks.detect(envs[0]).job}, "one job name for both runs"
    found = assert_each_run_whole(logdir, tmp_path / "data", expected)
    assert found["second"].name > found["first"].name       # the newest session is the last run's
    assert not (tmp_path / "fallback").exists()


# -------------------------------------------------------- Slurm, two steps
def slurm_envs(job, step, nranks, restart=None):
    """What srun sets in each task (srun(1), OUTPUT ENVIRONMENT VARIABLES)."""
    out = []
    for r in range(nranks):
        e = {"SLURM_JOB_ID": job, "SLURM_JOBID": job, "SLURM_STEP_ID": step, "SLURM_STEPID": step,
             "SLURM_PROCID": str(r), "SLURM_LOCALID": str(r), "SLURM_NODEID": "0", "SLURM_NTASKS": str(nranks),
             "SLURM_NPROCS": str(nranks), "SLURM_STEP_NUM_TASKS": str(nranks), "SLURM_STEP_NUM_NODES": "1"}
        if restart is not None:
            e["SLURM_RESTART_COUNT"] = str(restart)
        out.append(e)
    return out


def test_a_slurm_jobs_two_srun_steps_give_two_whole_sessions(tmp_path):
    # (a requeued job's steps, numbered from 0 again, are told apart by name:
    # test_launchers_name_runs_as_they_set_them)
    runs = ["step0", "step1"]
    expected = make_data(tmp_path / "data", runs, 2)
    logdir = tmp_path / "logs"
    for step, run in enumerate(runs):
        finish(start_ranks(slurm_envs("5150", str(step), 2), logdir, tmp_path / "data", run, tmp_path))
    assert_each_run_whole(logdir, tmp_path / "data", expected)


# -------------------------------------------------------- Open MPI, twice
@needs_mpirun
def test_two_mpirun_runs_into_one_log_directory_give_two_whole_sessions(tmp_path):
    runs = ["first", "second"]
    expected = make_data(tmp_path / "data", runs, 2)
    logdir = tmp_path / "logs"
    for run in runs:
        p = subprocess.run(["mpirun", "-np", "2", *member(logdir, tmp_path / "data", run, "OMPI_COMM_WORLD_RANK", 2,
                                                          tmp_path / "barriers" / run)],
                           env={**os.environ, **MPI_ENV, "TFDARSHAN_FALLBACK_DIR": str(tmp_path / "fallback")},
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
    assert not (tmp_path / "fallback").exists()
    found = assert_each_run_whole(logdir, tmp_path / "data", expected)
    jobs = {tfdarshan.read_darshan_log(s.directory / f"{HOST}.rank0.darshan").meta["job_metadata"]["job"]
            for s in found.values()}
    assert len(jobs) == 2 and all(j.startswith("ompi-") for j in jobs)


# ------------------------------------------------------ torchrun, twice
def torchrun_envs(nranks, port, run_id="none"):
    """What torchrun sets in each worker with a static rendezvous
    (`torchrun --nnodes 1 --node-rank 0 --master-addr A --master-port P`,
    seen in torch 2.13's workers): the same run id and port on every run."""
    return [{"RANK": str(r), "LOCAL_RANK": str(r), "GROUP_RANK": "0", "ROLE_RANK": str(r), "WORLD_SIZE": str(nranks),
             "LOCAL_WORLD_SIZE": str(nranks), "ROLE_WORLD_SIZE": str(nranks), "GROUP_WORLD_SIZE": "1",
             "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "TORCHELASTIC_RUN_ID": run_id,
             "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0", "ROLE_NAME": "default"}
            for r in range(nranks)]


def test_two_torchrun_runs_with_the_default_rendezvous_id_give_two_whole_sessions(tmp_path):
    runs = ["first", "second"]
    expected = make_data(tmp_path / "data", runs, 2)
    logdir = tmp_path / "logs"
    for run in runs:
        finish(start_ranks(torchrun_envs(2, 29500), logdir, tmp_path / "data", run, tmp_path))
    assert_each_run_whole(logdir, tmp_path / "data", expected)


@needs_torchrun
@pytest.mark.slow
def test_two_real_torchrun_runs_give_two_whole_sessions(tmp_path):
    runs = ["first", "second"]
    expected = make_data(tmp_path / "data", runs, 2)
    logdir = tmp_path / "logs"
    port = 29000 + os.getpid() % 1000
    for run in runs:
        cmd = [str(TORCHRUN), "--nnodes", "1", "--node-rank", "0", "--nproc-per-node", "2", "--master-addr",
               "127.0.0.1", "--master-port", str(port), "-m", *member(logdir, tmp_path / "data", run, "RANK", 2,
                                                                     tmp_path / "barriers" / run)[2:]]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-3000:]
    found = assert_each_run_whole(logdir, tmp_path / "data", expected)
    metas = [tfdarshan.read_darshan_log(s.directory / f"{HOST}.rank0.darshan").meta["job_metadata"]
             for s in found.values()]
    assert {m["job"] for m in metas} == {metas[0]["job"]}, "torchrun named both runs alike"


# ------------------------------------------------------- the rule itself
def rank_of(r, size, job="world-none-abc", per_run=False):
    return ranks.Rank(r, size, job, "RANK", per_run=per_run)


def names():
    n = iter(range(10_000))
    return lambda: f"2030_01_01_00_00_{next(n):02d}"


@pytest.fixture
def root(tmp_path):
    """A sessions' root, as plugins/tfdarshan is."""
    return tmp_path / "plugins" / "tfdarshan"


def test_ranks_of_one_run_racing_meet_in_one_session(root):
    # 8 ranks start at once, twice: each run one session, with all its ranks
    new_name, got = names(), {}
    for run in range(2):
        barrier = threading.Barrier(8)

        def rank(r):
            barrier.wait()
            got[(run, r)] = jobdir.job_directory(root, rank_of(r, 8), new_name)

        threads = [threading.Thread(target=rank, args=(r,)) for r in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    first, second = ({got[(run, r)] for r in range(8)} for run in range(2))
    assert len(first) == 1 and len(second) == 1 and first != second
    # nothing half-made is left: the two sessions, and the agreement's own files beside their root
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in first | second)
    assert sorted(p.name for p in root.parent.iterdir()) == sorted([root.name, jobdir.JOBS])
    assert not [p for p in jobdir.jobs_directory(root).rglob(".*")], "no temporary file is left"


def test_a_run_whose_ranks_have_finished_is_not_joined(root):
    # ranks 0 and 1 of 4 started and finished (the launcher gave up on the rest);
    # the re-run's rank 3, first to come, must not join them
    new_name = names()
    old = jobdir.job_directory(root, rank_of(0, 4), new_name)
    (old / "vm_4242.darshan").write_text("x")       # a `--children` child's log: its rank still runs
    assert jobdir.job_directory(root, rank_of(1, 4), new_name) == old
    (old / ".tfdarshan-done.rank0").write_text("x")
    late = jobdir.job_directory(root, rank_of(3, 4), new_name)
    assert late != old
    assert {jobdir.job_directory(root, rank_of(r, 4), new_name) for r in (0, 1, 2)} == {late}


def test_a_run_started_long_ago_is_not_joined(root):
    new_name = names()
    old = jobdir.job_directory(root, rank_of(0, 2), new_name)
    marker = jobdir.jobs_directory(root) / "world-none-abc" / "0"
    stale = marker.stat().st_mtime - jobdir.JOIN_WINDOW - 10
    os.utime(marker, (stale, stale))
    assert jobdir.job_directory(root, rank_of(1, 2), new_name) != old


def test_a_launcher_that_names_each_run_lets_a_late_rank_join(root):
    # Slurm's step, Open MPI's job: a rank that starts after the others
    # finished, or long after, is still of their run
    new_name = names()
    job = "slurm-77.0"
    first = jobdir.job_directory(root, rank_of(0, 2, job, per_run=True), new_name)
    (first / ".tfdarshan-done.rank0").write_text("x")
    marker = jobdir.jobs_directory(root) / job / "0"
    stale = time.time() - 10 * jobdir.JOIN_WINDOW
    os.utime(marker, (stale, stale))
    assert jobdir.job_directory(root, rank_of(1, 2, job, per_run=True), new_name) == first
    # the same name again, all places taken: a run of its own
    assert jobdir.job_directory(root, rank_of(0, 2, job, per_run=True), new_name) != first


def test_runs_started_in_the_same_second_get_their_own_directories(root):
    same = lambda: "2030_01_01_00_00_00"        # noqa: E731
    a = jobdir.job_directory(root, rank_of(0, 1, "a", per_run=True), same)
    b = jobdir.job_directory(root, rank_of(0, 1, "b", per_run=True), same)
    c = jobdir.new_session_directory(root, same)
    assert len({a, b, c}) == 3 and all(d.is_dir() for d in (a, b, c))
    assert sorted(d.name for d in (a, b, c)) == [d.name for d in (a, b, c)]     # newest sorts last


def test_a_damaged_marker_is_not_followed(root):
    new_name = names()
    first = jobdir.job_directory(root, rank_of(0, 2, "j", per_run=True), new_name)
    (jobdir.jobs_directory(root) / "j" / "0").write_text("../../../etc")
    other = jobdir.job_directory(root, rank_of(1, 2, "j", per_run=True), new_name)
    assert other != first and other.parent == root


# ------------------------------------------ what each launcher names a run
def test_launchers_name_runs_as_they_set_them():
    # Open MPI 4.1's mpirun, two runs (seen in a rank's environment here)
    a = {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_MCA_ess_base_jobid": "1398800385",
         "PMIX_NAMESPACE": "1398800385", "PMIX_RANK": "0",
         "OMPI_MCA_orte_precondition_transports": "b688bec7b349f7e8-df176bd634a6c5a0"}
    b = {**a, "OMPI_MCA_orte_precondition_transports": "49d3dc5b9bae6aa2-cf1d3fda5ca50f5b"}
    assert ranks.detect(a).job != ranks.detect(b).job and ranks.detect(a).per_run
    assert ranks.detect(a).job.startswith("ompi-1398800385")
    # Slurm: each srun a step; a requeue numbered apart
    jobs = {ranks.detect(e[0]).job for e in (slurm_envs("9", "0", 2), slurm_envs("9", "1", 2),
                                             slurm_envs("9", "0", 2, restart=2))}
    assert len(jobs) == 3
    assert ranks.detect({"PMIX_RANK": "0", "PMIX_SIZE": "2", "PMIX_NAMESPACE": "slurm.pmix.9.0",
                         "SLURM_RESTART_COUNT": "1"}).job == "pmix-slurm.pmix.9.0.r1"
    # torchrun: a static rendezvous names every run alike, and says so
    static = ranks.detect(torchrun_envs(2, 29500)[1])
    assert (static.rank, static.size, static.per_run) == (1, 2, False)
    assert ranks.detect(torchrun_envs(2, 29500)[0]).job == static.job
    assert ranks.detect(torchrun_envs(2, 29501)[0]).job != static.job
    # --standalone: a fresh UUID every run
    standalone = ranks.detect(torchrun_envs(2, 41234, "daf8dcfe-46eb-4687-8cd8-8d26ed6a8ff5")[0])
    assert standalone.per_run
    # TF_CONFIG: nothing in it changes between runs
    assert not ranks.detect(tf_config_envs([1, 2])[0]).per_run
