"""`tfdarshan analyze` on Dask: a 64-rank session (4 ranks of a real
pipeline under `tfdarshan run`, scaled with the project's own log writer)
gives the same per-file and per-rank figures as a direct pandas computation
over the same logs, on the embedded engine and on a real two-worker Dask
cluster started here on 127.0.0.1."""
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import tfdarshan
from tfdarshan.analysis.analyze import analyze, rank_logs, read_table
from rank_session import copy_session, rank_of, scaled_copy

pytestmark = pytest.mark.cost(30)

REAL_RANKS, RANKS = 4, 64


@pytest.fixture(scope="module")
def session(tmp_path_factory, pipeline_ranks):
    root = tmp_path_factory.mktemp("analyze")
    # rank r repeats real rank r % 4 with its byte counts multiplied by (1 + r // 4)
    return scaled_copy(pipeline_ranks, root, REAL_RANKS, RANKS)


def expected(session_dir):
    """Per file and per rank, straight from the logs with pandas."""
    rows, ranks = [], []
    for log in rank_logs(session_dir):
        rank = rank_of(log)
        snap = tfdarshan.read_darshan_log(log)
        for module, f in (("POSIX", snap.posix), ("STDIO", snap.stdio)):
            for x in f.itertuples(index=False):
                d = x._asdict()
                rows.append({"path": d["path"], "rank": rank, "bytes_read": d[f"{module}_BYTES_READ"],
                             "bytes": d[f"{module}_BYTES_READ"] + d[f"{module}_BYTES_WRITTEN"],
                             "file_time": d[f"{module}_F_READ_TIME"] + d[f"{module}_F_WRITE_TIME"]
                             + d[f"{module}_F_META_TIME"]})
        steps = pd.read_parquet(log.with_name(log.name.replace(".darshan", ".steps.parquet")))
        # training steps the window did not cut, each step's wait (the wall time a read or metadata call was
        # in flight) capped at its length
        real = steps[(steps["step"] >= 0) & ~steps["cut_by_window_end"]]
        length = real["end"] - real["start"]
        wait = np.minimum(np.minimum(real["io_wall"], real["read_time"] + real["meta_time"]), length)
        ranks.append({"rank": rank, "bytes_read": sum(r["bytes_read"] for r in rows if r["rank"] == rank),
                      "input_wait_share": float(wait.sum() / length.sum())})
    per_rank_file = pd.DataFrame(rows).groupby(["path", "rank"], as_index=False).sum()
    g = per_rank_file.groupby("path")
    files = pd.DataFrame({"bytes_read": g["bytes_read"].sum(), "ranks": g["rank"].nunique(),
                          "bytes_min": g["bytes"].min(), "bytes_median": g["bytes"].median(),
                          "bytes_max": g["bytes"].max(), "file_time_max": g["file_time"].max()})
    return files.sort_index(), pd.DataFrame(ranks).set_index("rank").sort_index()


def check(session_dir, n_ranks=RANKS):
    files, ranks = expected(session_dir)
    got_files = read_table(session_dir, "files").set_index("path").sort_index()
    got_ranks = read_table(session_dir, "ranks").set_index("rank").sort_index()
    assert list(got_files.index) == list(files.index)
    for c in files.columns:
        assert np.allclose(got_files[c].to_numpy(np.float64), files[c].to_numpy(np.float64)), c
    assert list(got_ranks.index) == list(range(n_ranks))
    assert (got_ranks["bytes_read"] == ranks["bytes_read"]).all()
    assert np.allclose(got_ranks["input_wait_share"], ranks["input_wait_share"])
    # the file every rank read, and the shards read by one real rank and its 15 scaled copies
    shared = [p for p in files.index if p.endswith("shared.bin")]
    assert shared and int(got_files.loc[shared[0], "ranks"]) == n_ranks
    steps = read_table(session_dir, "steps")
    # three steps a rank, and its set-up and wind-down apart (not counted)
    assert len(steps) == n_ranks * 5 and set(steps["step"]) == {-2, 0, 1, 2, -3}
    assert (steps["counted"] == (steps["step"] >= 0)).all()
    return got_files, got_ranks


# each table in a fixed order, to compare engines
TABLE_KEYS = {"files": ["path"], "ranks": ["rank"], "steps": ["rank", "step"], "mounts": ["mount"],
              "rank_mounts": ["rank", "mount"]}


@pytest.fixture(scope="module")
def embedded(session):
    """The session analysed on the embedded engine, and its tables as read back then."""
    r = analyze(session)
    return r, {n: read_table(session, n).sort_values(k).reset_index(drop=True) for n, k in TABLE_KEYS.items()}


def test_analyze_on_the_embedded_engine(session, embedded):
    r, _ = embedded
    assert r["ranks"] == RANKS and "local cluster" in r["where"]      # 64 logs: worth a local cluster
    assert not (session / "analysis.partial").exists()
    check(session)


def test_a_small_session_is_analysed_here_without_importing_distributed(pipeline_ranks, tmp_path):
    # under SMALL_SESSION logs the graph runs on Dask's threaded scheduler in
    # the command's own process; named rather than given, that scheduler
    # makes dask import distributed to look for a client first (≈ 0.5 s a command)
    small = copy_session(pipeline_ranks, tmp_path)
    code = ("import sys; from tfdarshan.analysis.analyze import analyze; r = analyze(sys.argv[1]); "
            "print(r['where'], r['ranks'], 'distributed' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code, str(small)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split()[-4:] == ["this", "process", str(REAL_RANKS), "False"]
    check(small, REAL_RANKS)


def test_the_same_graph_on_a_two_worker_cluster(session, embedded, tmp_path):
    from tb_helpers import free_port
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", str(port), "--dashboard-address", ":0"], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # workers without a nanny, which took 8 s to close one
    workers = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny",
                                 "--nthreads", "1", "--dashboard-address", ":0", "--local-directory",
                                 str(tmp_path / f"w{i}")], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(2)]
    from distributed import Client
    try:
        with Client(address, timeout="60s") as c:
            c.wait_for_workers(2, timeout=120)
        r = analyze(session, scheduler=address)
        assert r["where"] == f"cluster {address}"
        check(session)
        # every table, value for value: the same tasks ran on another engine
        for name, k in TABLE_KEYS.items():
            table = read_table(session, name).sort_values(k).reset_index(drop=True)
            pd.testing.assert_frame_equal(table, embedded[1][name], check_exact=True)
    finally:
        # a worker sometimes sat out a SIGTERM for 30 s on a loaded machine:
        # the scheduler closes the cluster instead, and what is left is killed
        try:
            with Client(address, timeout="10s") as c:
                c.shutdown()
        except (OSError, TimeoutError):
            pass                                    # the scheduler never came up, or is gone
        for p in workers + [scheduler]:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def test_analyze_command_names_the_most_shared_file(session):
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(session)], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"analyzed {RANKS} logs" in r.stdout and "shared.bin" in r.stdout and f"({RANKS} of {RANKS} ranks)" in r.stdout
    bad = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(session / "nope")], capture_output=True,
                         text=True, timeout=120)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
