"""One damaged rank does not block the job: with one rank's log of a real
three-rank session truncated to 3,000 bytes, `joblog`, `analyze` and
`recommend` analyse the other ranks, name the bad log in one warning line,
and count it in their output (and in the job log's metadata)."""
import json
import os
import re
import subprocess
import sys

import pytest

from tfdarshan.analysis.analyze import read_table
from tfdarshan.logs import joblog
from tfdarshan.logs.darshan_log import read_job_record
from rank_session import pipeline_inputs, real_session

RANKS, BAD = 3, 1
STEPS, PARTS = 3, 60
# each step reads the shared file and 50,000 * (rank + 1) bytes of the
# rank's own shard (unbuffered: the bytes asked for are the bytes read);
# sixty small files a rank besides make a log well past 3,000 bytes
SCRIPT = """
import os, sys, tfdarshan
rank = int(os.environ["SLURM_PROCID"])
shared, own = sys.argv[1], sys.argv[2:]
for step in range(%d):
    with tfdarshan.step(step):
        with open(shared, "rb", buffering=0) as f:
            f.read()
        with open(own[rank], "rb", buffering=0) as f:
            f.read(50_000 * (rank + 1))
for i in range(%d):
    with open(os.path.join(os.path.dirname(shared), f"part-{rank}-{i:03d}.bin"), "rb") as f:
        f.read()
""" % (STEPS, PARTS)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    root = tmp_path_factory.mktemp("damaged")
    inputs = pipeline_inputs(root, RANKS)
    for r in range(RANKS):
        for i in range(PARTS):
            (root / f"part-{r}-{i:03d}.bin").write_bytes(b"p" * (i + 1))
    session_dir = real_session(root, SCRIPT, inputs, RANKS, job="2424")
    (bad,) = session_dir.glob(f"*.rank{BAD}.darshan")
    assert bad.stat().st_size > 3000, "the log must be longer than what is left of it"
    bad.chmod(0o600)
    with open(bad, "r+b") as f:
        f.truncate(3000)
    return session_dir, bad, inputs


def tfdarshan_cli(*args):
    return subprocess.run([sys.executable, "-m", "tfdarshan", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def warnings_naming(stderr, name):
    lines = [line for line in stderr.splitlines() if "warning" in line]
    assert len(lines) == 1, stderr
    assert name in lines[0] and "skipped 1 unreadable" in lines[0]


def test_joblog_writes_the_other_ranks_and_says_which_was_skipped(damaged):
    import darshan
    session_dir, bad, inputs = damaged
    shared, shards = inputs[0], inputs[1:]
    r = tfdarshan_cli("joblog", session_dir)
    assert r.returncode == 0, r.stderr
    warnings_naming(r.stderr, bad.name)
    assert f"{RANKS - 1} of {RANKS} ranks" in r.stdout and "1 unreadable rank log skipped" in r.stdout
    (job,) = session_dir.glob("*" + joblog.JOB_SUFFIX)
    meta = read_job_record(job)["metadata"]
    assert (meta["skipped"], meta["skipped_logs"], meta["ranks"]) == ("1", bad.name, str(RANKS - 1))
    with darshan.DarshanReport(str(job), read_all=False) as rep:
        rep.mod_read_all_records("POSIX")
        c = rep.records["POSIX"].to_df()["counters"]
        names = rep.name_records
        assert rep.metadata["job"]["nprocs"] == RANKS
    read = {(int(rk), names[int(i)]): int(b) for i, rk, b in zip(c["id"], c["rank"], c["POSIX_BYTES_READ"])}
    for rank in set(range(RANKS)) - {BAD}:
        assert read[(rank, str(shards[rank]))] == STEPS * 50_000 * (rank + 1)
        assert read[(rank, str(shared))] == STEPS * shared.stat().st_size     # not every rank: not reduced
    assert not [k for k in read if k[0] == BAD] and str(shards[BAD]) not in {p for _, p in read}
    job.unlink()


def test_analyze_tables_hold_the_other_ranks(damaged):
    session_dir, bad, inputs = damaged
    r = tfdarshan_cli("analyze", session_dir)
    assert r.returncode == 0, r.stderr
    warnings_naming(r.stderr, bad.name)
    assert re.search(rf"analyzed {RANKS - 1} logs, 1 unreadable skipped", r.stdout), r.stdout
    ranks = read_table(session_dir, "ranks")
    assert sorted(ranks["rank"]) == sorted(set(range(RANKS)) - {BAD})
    files = read_table(session_dir, "files").set_index("path")
    assert str(inputs[1 + BAD]) not in files.index
    assert int(files.at[str(inputs[0]), "ranks"]) == RANKS - 1
    assert json.loads((session_dir / "analysis" / "skipped.json").read_text())[0]["log"] == bad.name


def test_recommend_advises_on_the_other_ranks_and_counts_the_skipped_log(damaged, tmp_path):
    session_dir, bad, inputs = damaged
    logdir = session_dir.parent.parent.parent
    r = tfdarshan_cli("recommend", logdir, "--fast-tier", "/dev/shm", "--capacity", "100%", "--format", "json",
                      "--no-store")
    assert r.returncode == 0, r.stderr
    warnings_naming(r.stderr, bad.name)
    assert f"({RANKS} processes; 1 unreadable log skipped)" in r.stderr
    advice = json.loads(r.stdout)
    assert str(inputs[1 + BAD]) not in {f["path"] for f in advice["files"]}
    (left_out,) = [f for f in advice["findings"] if "unreadable log" in f["title"]]
    assert [s["log"] for s in left_out["evidence"]["skipped_logs"]] == [bad.name]
    assert os.path.exists(bad)
