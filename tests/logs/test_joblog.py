"""The job log of a multi-rank session: Darshan's shared-file reduction
(rules from darshan-runtime 3.5's posix/stdio_record_reduction_op), the
session directory the ranks agree on, and the rank of a process."""
import json
import os
import threading

import numpy as np
import pandas as pd
import pytest

from tfdarshan.capture import counters as C, ranks
from tfdarshan.logs import jobdir
from job_records import fold_job
from reduction_oracle import reduce_job

SHARED, PRIVATE = 111, 222
# each expectation below is computed by hand; both the product's fold and the
# oracle the job log is compared with elsewhere must meet it
REDUCERS = pytest.mark.parametrize("reduce_job", [fold_job, reduce_job], ids=["fold", "oracle"])


def frame(module, rows):
    """A snapshot frame holding `rows` ({column: value}, the rest zero)."""
    f = C.empty_frame(module)
    out = pd.DataFrame([{c: 0 for c in f.columns} | r for r in rows], columns=f.columns)
    return out.astype(f.dtypes.to_dict())


def posix_rank(record_id, **c):
    return {"record_id": record_id, "path": f"/data/{record_id}", **{f"POSIX_{k}": v for k, v in c.items()}}


@REDUCERS
def test_posix_shared_file_reduced_by_darshans_rules(reduce_job):
    r0 = posix_rank(SHARED, OPENS=1, READS=2, BYTES_READ=100, MAX_BYTE_READ=99, MODE=420, F_READ_TIME=0.1,
                    F_META_TIME=0.05, F_OPEN_START_TIMESTAMP=1.0, F_OPEN_END_TIMESTAMP=1.1,
                    F_MAX_READ_TIME=0.08, MAX_READ_TIME_SIZE=60, ACCESS1_ACCESS=60, ACCESS1_COUNT=1,
                    ACCESS2_ACCESS=40, ACCESS2_COUNT=1, SIZE_READ_0_100=2)
    r1 = posix_rank(SHARED, OPENS=1, READS=3, BYTES_READ=300, MAX_BYTE_READ=199, MODE=384, F_READ_TIME=0.4,
                    F_META_TIME=0.1, F_OPEN_START_TIMESTAMP=0.5, F_OPEN_END_TIMESTAMP=2.0,
                    F_MAX_READ_TIME=0.3, MAX_READ_TIME_SIZE=100, ACCESS1_ACCESS=100, ACCESS1_COUNT=3,
                    SIZE_READ_0_100=3)
    r2 = posix_rank(SHARED, OPENS=2, READS=1, BYTES_READ=50, MAX_BYTE_READ=49, MODE=420, F_READ_TIME=0.02,
                    F_META_TIME=0.03, F_OPEN_START_TIMESTAMP=0.7, F_OPEN_END_TIMESTAMP=1.5,
                    F_MAX_READ_TIME=0.3, MAX_READ_TIME_SIZE=50, ACCESS1_ACCESS=50, ACCESS1_COUNT=1,
                    SIZE_READ_0_100=1)
    mine = posix_rank(PRIVATE, OPENS=1, READS=5, BYTES_READ=5000)
    out = reduce_job({0: frame("POSIX", [r0]), 1: frame("POSIX", [r1, mine]), 2: frame("POSIX", [r2])},
                     "POSIX")
    assert sorted(zip(out["record_id"], out["rank"])) == [(SHARED, -1), (PRIVATE, 1)]
    private = out[out["record_id"] == PRIVATE].iloc[0]
    assert (private["POSIX_READS"], private["POSIX_BYTES_READ"], private["POSIX_FASTEST_RANK"]) == (5, 5000, 0)
    s = out[out["record_id"] == SHARED].iloc[0]
    # sums, maxima, the first rank's mode, earliest start and latest end
    assert (s["POSIX_OPENS"], s["POSIX_READS"], s["POSIX_BYTES_READ"], s["POSIX_SIZE_READ_0_100"]) == (4, 6, 450, 6)
    assert s["POSIX_MAX_BYTE_READ"] == 199 and s["POSIX_MODE"] == 420
    assert s["POSIX_F_READ_TIME"] == pytest.approx(0.52) and s["POSIX_F_META_TIME"] == pytest.approx(0.18)
    assert s["POSIX_F_OPEN_START_TIMESTAMP"] == 0.5 and s["POSIX_F_OPEN_END_TIMESTAMP"] == 2.0
    assert s["POSIX_F_READ_START_TIMESTAMP"] == 0.0          # no rank recorded one: still "never"
    # the slowest call and its size; a tie goes to the later rank
    assert (s["POSIX_F_MAX_READ_TIME"], s["POSIX_MAX_READ_TIME_SIZE"]) == (0.3, 50)
    # per-rank I/O time: 0.15, 0.5, 0.05 s; bytes: 100, 300, 50
    assert (s["POSIX_FASTEST_RANK"], s["POSIX_FASTEST_RANK_BYTES"]) == (2, 50)
    assert s["POSIX_F_FASTEST_RANK_TIME"] == pytest.approx(0.05)
    assert (s["POSIX_SLOWEST_RANK"], s["POSIX_SLOWEST_RANK_BYTES"]) == (1, 300)
    assert s["POSIX_F_SLOWEST_RANK_TIME"] == pytest.approx(0.5)
    assert s["POSIX_F_VARIANCE_RANK_TIME"] == pytest.approx(0.111667 / 3, rel=1e-4)
    assert s["POSIX_F_VARIANCE_RANK_BYTES"] == pytest.approx(35000 / 3)
    # commonest access sizes: 100 (3 times), then 60, 50, 40 once each (ties: larger first)
    assert [s[f"POSIX_ACCESS{i}_ACCESS"] for i in range(1, 5)] == [100, 60, 50, 40]
    assert [s[f"POSIX_ACCESS{i}_COUNT"] for i in range(1, 5)] == [3, 1, 1, 1]


@REDUCERS
def test_same_access_size_on_several_ranks_adds_up(reduce_job):
    rows = {r: frame("POSIX", [posix_rank(SHARED, OPENS=1, ACCESS1_ACCESS=4096, ACCESS1_COUNT=r + 1,
                                          ACCESS2_ACCESS=8, ACCESS2_COUNT=1)]) for r in range(4)}
    s = reduce_job(rows, "POSIX").iloc[0]
    assert [s[f"POSIX_ACCESS{i}_ACCESS"] for i in range(1, 5)] == [4096, 8, 0, 0]
    assert [s[f"POSIX_ACCESS{i}_COUNT"] for i in range(1, 5)] == [1 + 2 + 3 + 4, 4, 0, 0]


@pytest.mark.parametrize("stats, expected", [((-1, -1, -1), -1), ((-1, -5, 2), 1), ((-1, 3), 2)])
@REDUCERS
def test_negative_sums_become_minus_one_at_each_step(stats, expected, reduce_job):
    # Darshan adds pairwise and sets a negative (invalid) sum to -1 each time:
    # (-1, -5, 2): -1 + -5 -> -1, then -1 + 2 = 1
    rows = {r: frame("POSIX", [posix_rank(SHARED, OPENS=1, STATS=v)]) for r, v in enumerate(stats)}
    assert reduce_job(rows, "POSIX").iloc[0]["POSIX_STATS"] == expected


@REDUCERS
def test_stdio_shared_file(reduce_job):
    def row(**c):
        return {"record_id": SHARED, "path": "/data/s", **{f"STDIO_{k}": v for k, v in c.items()}}
    rows = {0: frame("STDIO", [row(OPENS=1, WRITES=2, BYTES_WRITTEN=10, MAX_BYTE_WRITTEN=9, F_WRITE_TIME=0.2,
                                   F_WRITE_START_TIMESTAMP=0.3, F_WRITE_END_TIMESTAMP=0.4)]),
            1: frame("STDIO", [row(OPENS=1, WRITES=1, BYTES_WRITTEN=30, MAX_BYTE_WRITTEN=39, F_WRITE_TIME=0.1,
                                   F_WRITE_START_TIMESTAMP=0.2, F_WRITE_END_TIMESTAMP=0.9)])}
    s = reduce_job(rows, "STDIO").iloc[0]
    assert s["rank"] == -1 and (s["STDIO_OPENS"], s["STDIO_WRITES"], s["STDIO_BYTES_WRITTEN"]) == (2, 3, 40)
    assert s["STDIO_MAX_BYTE_WRITTEN"] == 39
    assert (s["STDIO_F_WRITE_START_TIMESTAMP"], s["STDIO_F_WRITE_END_TIMESTAMP"]) == (0.2, 0.9)
    assert (s["STDIO_FASTEST_RANK"], s["STDIO_SLOWEST_RANK"]) == (1, 0)
    assert (s["STDIO_FASTEST_RANK_BYTES"], s["STDIO_SLOWEST_RANK_BYTES"]) == (30, 10)
    assert s["STDIO_F_VARIANCE_RANK_BYTES"] == pytest.approx(100.0)     # 10 and 30 around 20


# ------------------------------------------------------------------ ranks
@pytest.mark.parametrize("env, rank, size, job, launcher", [
    ({"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_MCA_ess_base_jobid": "1265893377",
      "PMIX_RANK": "3", "PMIX_NAMESPACE": "1265893377"}, 3, 4, "ompi-1265893377", "OMPI_COMM_WORLD_RANK"),
    ({"PMIX_RANK": "1", "PMIX_SIZE": "2", "PMIX_NAMESPACE": "slurm.pmix.77.0"}, 1, 2, "pmix-slurm.pmix.77.0",
     "PMIX_RANK"),
    ({"PMI_RANK": "5", "PMI_SIZE": "8", "PMI_KVSNAME": "kvs_4242_0"}, 5, 8, "pmi-kvs_4242_0", "PMI_RANK"),
    ({"SLURM_PROCID": "7", "SLURM_NTASKS": "1024", "SLURM_JOB_ID": "99", "SLURM_STEP_ID": "2"}, 7, 1024,
     "slurm-99.2", "SLURM_PROCID"),
    ({"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1", "b:1"], "chief": ["c:1"]},
                               "task": {"type": "worker", "index": 1}})}, 2, 3, None, "TF_CONFIG"),
])
def test_rank_from_each_launcher(env, rank, size, job, launcher):
    r = ranks.detect(env)
    assert (r.rank, r.size, r.launcher) == (rank, size, launcher)
    if job:
        assert r.job == job


def test_torchrun_style_ranks_of_one_job_agree_on_its_id():
    base = {"WORLD_SIZE": "4", "MASTER_ADDR": "node1", "MASTER_PORT": "29500"}
    jobs = {ranks.detect({**base, "RANK": str(i)}).job for i in range(4)}
    assert len(jobs) == 1
    assert ranks.detect({**base, "RANK": "0", "MASTER_PORT": "29501"}).job not in jobs


def test_tf_config_ranks_are_distinct_and_dense():
    cluster = {"chief": ["c:1"], "worker": ["a:1", "b:1", "d:1"], "ps": ["p:1"]}
    got = sorted(ranks.detect({"TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": t, "index": i}})}).rank
                 for t, hosts in cluster.items() for i in range(len(hosts)))
    assert got == list(range(5))


@pytest.mark.parametrize("env", [
    {}, {"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4"}, {"SLURM_PROCID": "x", "SLURM_NTASKS": "2"},
    {"RANK": "0"}, {"TF_CONFIG": "{not json"},
    {"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}})},
])
def test_no_rank_when_no_launcher_says_so(env):
    assert ranks.detect(env) is None


def test_ranks_agree_on_one_session_directory(tmp_path):
    root = tmp_path / "plugins" / "tfdarshan"
    # the 16 ranks of a job race to name its directory; each proposes its own name
    got, names = [], iter(range(1000))
    barrier = threading.Barrier(16)

    def rank(r):
        barrier.wait()
        got.append(jobdir.job_directory(root, ranks.Rank(r, 16, "slurm-7.0", "SLURM_PROCID"),
                                        lambda: f"session{next(names)}"))

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 16 and len(set(got)) == 1
    # another job gets another directory; only the sessions are left in their root
    other = jobdir.job_directory(root, ranks.Rank(0, 1, "slurm-8.0", "SLURM_PROCID"), lambda: "other")
    assert other == root / "other"
    assert sorted(p.name for p in root.iterdir()) == sorted([got[0].name, "other"])


def test_writer_refuses_a_rank_past_nprocs(tmp_path):
    # libdarshan-util's readers abort the whole process on such a log
    import tfdarshan
    from tfdarshan.errors import DarshanLogError
    snap = tfdarshan.Snapshot(frame("POSIX", [posix_rank(SHARED, OPENS=1)]).assign(rank=2),
                              C.empty_frame("STDIO"), *_empties())
    with pytest.raises(DarshanLogError, match="rank 2 in a log of 2"):
        tfdarshan.write_darshan_log(snap, tmp_path / "bad.darshan", nprocs=2)
    assert not (tmp_path / "bad.darshan").exists()
    tfdarshan.write_darshan_log(snap, tmp_path / "good.darshan", nprocs=3)


def _empties():
    from tfdarshan.capture.snapshot import empty_dxt, empty_extra, empty_values
    return empty_values(), empty_extra(), empty_dxt(), {"origin_unix_time": 1.0e9}
