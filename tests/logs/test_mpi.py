"""Multi-rank jobs: every rank records into one session directory, under
Open MPI's mpirun (with MPI_Init through mpi4py) and when each rank starts
its own `tfdarshan run` (as inside srun); one Darshan job log with nprocs =
ranks and the files every rank read reduced to rank -1; Drishti reads it."""
import json
import os
import pathlib
import re
import socket
import subprocess
import sys

import pytest

import tfdarshan
from tfdarshan.logs import joblog, logdir as logdir_mod
from mpi_env import MPI_ENV, needs_mpi
from mpi_tf_job import NRANKS as JOB_RANKS, SHARED_SIZE, make_shards as make_data
from places import WORKERS

pytestmark = pytest.mark.cost(60)

WORKER = WORKERS / "rank_reader.py"
HOST = socket.gethostname()


def session_dir(logdir: pathlib.Path) -> pathlib.Path:
    dirs = [d for d in (logdir / "plugins" / "tfdarshan").iterdir() if d.is_dir()]
    assert len(dirs) == 1, f"the ranks must share one session directory, found {dirs}"
    return dirs[0]


def posix_rows(log):
    """(rank, path) -> counters, with each record's rank, as PyDarshan reads them."""
    import darshan
    with darshan.DarshanReport(str(log), read_all=False) as rep:
        rep.mod_read_all_records("POSIX")
        c = rep.records["POSIX"].to_df()["counters"]
        names = rep.name_records
        nprocs = rep.metadata["job"]["nprocs"]
    ids, ranks = c["id"].to_numpy(dtype="uint64"), c["rank"].to_numpy()
    rows = {(int(rank), names[int(rid)]): c.iloc[i] for i, (rid, rank) in enumerate(zip(ids, ranks))}
    return nprocs, rows


def check_job(logdir, sizes, nranks, reads_per_file):
    d = session_dir(logdir)
    shared = str(pathlib.Path(next(iter(sizes))).parent / "shared.bin")
    # each rank's own log: its shards and the shared file, exactly
    for r in range(nranks):
        snap = tfdarshan.read_darshan_log(d / f"{HOST}.rank{r}.darshan")
        assert snap.meta["job_metadata"]["rank"] == str(r)
        assert snap.meta["job_metadata"]["world_size"] == str(nranks)
        p = snap.posix.set_index("path")
        mine = {path for path, (owner, _) in sizes.items() if owner == r}
        assert mine | {shared} <= set(p.index)
        assert not {path for path, (owner, _) in sizes.items() if owner != r} & set(p.index)
        for path in mine | {shared}:
            size = sizes[path][1] if path in sizes else SHARED_SIZE
            assert (p.at[path, "POSIX_OPENS"], p.at[path, "POSIX_READS"], p.at[path, "POSIX_BYTES_READ"]) == \
                (1, reads_per_file, size), (r, path)
    # the job log: nprocs, ranks kept, the shared file reduced
    logs = list(d.glob("*" + joblog.JOB_SUFFIX))
    assert len(logs) == 1
    nprocs, rows = posix_rows(logs[0])
    assert nprocs == nranks
    s = rows[(-1, shared)]
    assert (s["POSIX_OPENS"], s["POSIX_READS"], s["POSIX_BYTES_READ"]) == \
        (nranks, nranks * reads_per_file, nranks * SHARED_SIZE)
    assert 0 <= s["POSIX_FASTEST_RANK"] < nranks and 0 <= s["POSIX_SLOWEST_RANK"] < nranks
    assert s["POSIX_SLOWEST_RANK_BYTES"] == SHARED_SIZE
    for path, (r, size) in sizes.items():
        assert rows[(r, path)]["POSIX_BYTES_READ"] == size
    assert not [k for k in rows if k[1] == shared and k[0] != -1], "the shared file has one record"
    return logs[0]


def test_ranks_started_by_their_own_tfdarshan_run(tmp_path):
    # as inside srun: each rank runs `tfdarshan run` itself, told its place by Slurm's variables
    nranks = 3
    sizes = make_data(tmp_path / "data", nranks)
    logdir = tmp_path / "logs"
    procs = []
    for r in range(nranks):
        env = {**os.environ, "SLURM_PROCID": str(r), "SLURM_NTASKS": str(nranks), "SLURM_JOB_ID": "4242",
               "SLURM_STEP_ID": "0"}
        procs.append(subprocess.Popen([sys.executable, "-m", "tfdarshan", "run", "--trace", "--logdir", str(logdir),
                                       str(WORKER), str(tmp_path / "data"), "plain", str(r)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    # open().read(): one read with the data, one at end of file
    log = check_job(logdir, sizes, nranks, reads_per_file=2)
    assert log.name == "slurm-4242.0" + joblog.JOB_SUFFIX
    snap = tfdarshan.read_darshan_log(log)
    assert snap.meta["jobid"] == 4242
    assert_drishti_reads(log, nranks)
    # the trace stays per rank: each rank's reads of the shared file, under its rank
    import darshan
    with darshan.DarshanReport(str(log), read_all=False) as rep:
        rep.mod_read_all_dxt_records("DXT_POSIX", dtype="pandas")
        dxt = rep.records["DXT_POSIX"]
        names = rep.name_records
    shared = str(tmp_path / "data" / "shared.bin")
    on_shared = sorted(int(d["rank"]) for d in dxt if names[int(d["id"])] == shared)
    assert on_shared == list(range(nranks))
    assert all(d["read_segments"]["length"].sum() == SHARED_SIZE for d in dxt if names[int(d["id"])] == shared)
    # PyDarshan's report renders it
    html = tmp_path / "summary.html"
    summ = subprocess.run([sys.executable, "-m", "darshan", "summary", str(log), "--output", str(html)],
                          capture_output=True, text=True, timeout=300)
    assert summ.returncode == 0, summ.stderr[-2000:]
    assert re.search(rf"# Processes</th>\s*<td>{nranks}</td>", html.read_text())
    # and a rank's own log too (a record's rank past nprocs makes Darshan's reader abort)
    last = session_dir(logdir) / f"{HOST}.rank{nranks - 1}.darshan"
    summ = subprocess.run([sys.executable, "-m", "darshan", "summary", str(last), "--output",
                           str(tmp_path / "rank.html")], capture_output=True, text=True, timeout=300)
    assert summ.returncode == 0, summ.stderr[-2000:]
    # recommend reads the session as one job: every rank's reads, counted once
    rec = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(logdir), "--fast-tier", "/dev/shm",
                          "--format", "json"], capture_output=True, text=True, timeout=300)
    assert rec.returncode == 0, rec.stderr
    advice = json.loads(rec.stdout)
    assert {f["path"] for f in advice["files"]} <= set(sizes) | {str(tmp_path / "data" / "shared.bin")}
    [session] = logdir_mod.find_sessions(logdir)
    assert session.job_log == log.name and len(session.hosts) == nranks
    # the tab's selector: the job, then one entry a rank, in rank order
    from tfdarshan_tb import views
    [listed] = views.runs([session])["runs"][0]["sessions"]
    assert listed["labels"] == [f"{HOST} rank {r}" for r in range(nranks)] and listed["ranks"] == nranks
    whole = logdir_mod.load_snapshot(session).posix
    data = whole[whole["path"].str.startswith(str(tmp_path / "data"))]
    assert data["POSIX_BYTES_READ"].sum() == sum(s for _, s in sizes.values()) + nranks * SHARED_SIZE


@needs_mpi
def test_mpi_init_and_finalize_under_tfdarshan_run(tmp_path):
    # Open MPI dlopens dozens of components and dlcloses those it does not use
    script = tmp_path / "mpi_hello.py"
    script.write_text("from mpi4py import MPI\nc = MPI.COMM_WORLD\nc.Barrier()\n"
                      "print(c.Get_rank(), c.allreduce(1))\n")
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(tmp_path / "logs"), str(script)],
                       env={**os.environ, **MPI_ENV}, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["0", "1"]


@needs_mpi
def test_mpirun_four_ranks_tf_pipeline(mpi_tf_job):
    # four ranks under mpirun, each reading its shards and the shared file with tf.io.read_file
    # (the shared job's set-up: helpers/mpi_tf_job.py; each rank checked the bytes it read itself)
    # tf.io.read_file: the whole file in one pread, then one at end of file
    log = check_job(pathlib.Path(mpi_tf_job["logdir"]), mpi_tf_job["sizes"], JOB_RANKS, reads_per_file=2)
    assert log.name.startswith("ompi-")
    assert_drishti_reads(log, JOB_RANKS)


def assert_drishti_reads(log, nranks):
    """Drishti, a real client of Darshan logs, runs on the job log and
    counts its processes."""
    drishti = pathlib.Path(sys.executable).parent / "drishti"
    assert drishti.exists(), "drishti is missing (make test installs drishti-io with the test extra)"
    d = subprocess.run([str(drishti), str(log)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "COLUMNS": "120"})
    assert d.returncode == 0, d.stderr[-2000:]
    assert re.search(rf"PROCESSES\s+{nranks}\b", d.stdout), d.stdout[:2000]


def test_job_log_read_back_counts_partly_shared_files_once_per_rank(tmp_path):
    # a file two of three ranks opened keeps one record a rank in the job log;
    # reading the job log back adds them (it once kept the first rank's only)
    from tfdarshan.logs.joblog import write_job_log
    nranks = 3
    data = tmp_path / "data"
    data.mkdir()
    part = data / "part.bin"
    part.write_bytes(os.urandom(3000))
    logs = {}
    for r in range(nranks):
        # each rank's own log, recorded here (rank 1 reads nothing)
        out = tmp_path / f"logs{r}"
        with tfdarshan.profile(logdir=str(out)):
            if r != 1:
                part.read_bytes()
        logs[r] = next(out.glob("plugins/tfdarshan/*/*.darshan"))
    job = write_job_log(tmp_path, logs, "test", nranks)
    nprocs, rows = posix_rows(job)
    assert nprocs == nranks and sorted(r for r, p in rows if p == str(part)) == [0, 2]
    back = tfdarshan.read_darshan_log(job).posix.set_index("path")
    assert (back.at[str(part), "POSIX_OPENS"], back.at[str(part), "POSIX_BYTES_READ"]) == (2, 6000)


def test_joblog_command_after_a_rank_died(tmp_path):
    # rank 2 of 3 never finishes: no job log by itself; the command writes one
    # from the ranks that did, with nprocs from their logs
    nranks = 3
    sizes = make_data(tmp_path / "data", nranks)
    logdir = tmp_path / "logs"
    for r in (0, 1):
        env = {**os.environ, "SLURM_PROCID": str(r), "SLURM_NTASKS": str(nranks), "SLURM_JOB_ID": "77"}
        subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(WORKER),
                        str(tmp_path / "data"), "plain", str(r)], env=env, check=True, capture_output=True)
    d = session_dir(logdir)
    assert not list(d.glob("*" + joblog.JOB_SUFFIX))
    cmd = [sys.executable, "-m", "tfdarshan", "joblog", str(d)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "2 of 3 ranks" in p.stdout and "rank 2" in p.stdout
    nprocs, rows = posix_rows(d / ("slurm-77" + joblog.JOB_SUFFIX))
    shared = str(tmp_path / "data" / "shared.bin")
    # not every rank of the job opened it: each rank's record stays its own
    assert nprocs == nranks and sorted(r for r, path in rows if path == shared) == [0, 1]
    for path, (r, size) in sizes.items():
        if r < 2:
            assert rows[(r, path)]["POSIX_BYTES_READ"] == size
    # again: refused, one line, nothing lost
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and len(again.stderr.strip().splitlines()) == 1 and "already exists" in again.stderr
    bad = subprocess.run([sys.executable, "-m", "tfdarshan", "joblog", str(tmp_path / "data")],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "not a multi-rank session" in bad.stderr
