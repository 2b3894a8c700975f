"""Smaller things a user of a four-rank job saw (issue 22, point 8): the run
selector showed "."; every flight-recorder dump directory carried the
recorder's start time, not the dump's; the straggler's suggested fix named
`--per-node` inside `--per-node`'s own output. (The standard streams' tier
and the mounts table's file counts: test_coverage_buckets.py; the file
table's header alignment: test_tb_verdict_ranks.py.)"""
import datetime
import time

import pandas as pd

import tfdarshan
from tfdarshan.advice import distributed
from tfdarshan.logs.logdir import Session
from tfdarshan_tb import views


def test_the_log_directory_itself_is_named_in_words(tmp_path):
    top = Session(".", "2026_01_01_00_00_00", tmp_path, ("vm",))
    nested = Session("exp1/train", "2026_01_01_00_00_01", tmp_path, ("vm",))
    labels = {r["run"]: r["label"] for r in views.runs([top, nested])["runs"]}
    assert labels == {".": views.TOP_LEVEL, "exp1/train": "exp1/train"}
    assert "." != views.TOP_LEVEL


def test_a_dump_is_named_by_its_own_time(tmp_path):
    fr = tfdarshan.flight_recorder(seconds=30, logdir=str(tmp_path))
    try:
        started = time.time()
        (tmp_path / "x.bin").write_bytes(b"x" * 1000)
        (tmp_path / "x.bin").read_bytes()
        time.sleep(1.2)                       # a second later at least: the names differ in their seconds
        asked = time.time()
        out = fr.dump("asked from the test")
    finally:
        fr.stop()
    stamp = datetime.datetime.strptime(out.name.split("_flight_")[0], "%Y_%m_%d_%H_%M_%S").timestamp()
    # the name's second is the dump's (at or after it was asked for), past the recorder's start
    assert int(asked) <= stamp <= time.time() and stamp > int(started)


def tables():
    """Four ranks: rank 3 reads from another mount (its tier explains its wait),
    and all four read one file that costs most of the job's I/O time."""
    ranks = pd.DataFrame({"rank": [0, 1, 2, 3], "host": ["n0", "n0", "n1", "n1"],
                          "input_wait_share": [0.05, 0.06, 0.05, 0.60], "bytes_read": [100, 100, 100, 110],
                          "opens": [10, 10, 10, 10], "duration": [10.0] * 4})
    rank_mounts = pd.DataFrame({"rank": [0, 1, 2, 3], "mount": ["/fast", "/fast", "/fast", "/slow"],
                                "fstype": ["tmpfs", "tmpfs", "tmpfs", "nfs"], "read_time": [1.0, 1.0, 1.0, 9.0],
                                "write_time": [0.0] * 4, "meta_time": [0.0] * 4,
                                "bytes_read": [100, 100, 100, 110], "opens": [10, 10, 10, 10],
                                "files": [2, 2, 2, 2]})
    files = pd.DataFrame({"path": ["/fast/shared", "/slow/own3"], "ranks": [4, 1], "bytes_read": [400, 10],
                          "read_time": [8.0, 4.0], "write_time": [0.0, 0.0], "meta_time": [0.0, 0.0]})
    return {"ranks": ranks, "rank_mounts": rank_mounts, "files": files}


def test_findings_beside_the_per_node_plans_point_at_them():
    alone = distributed.rank_findings(tables())
    assert {"1 straggling rank", "A file most ranks read (shared-file hot spot)"} <= {f.title for f in alone}
    assert sum("--per-node" in f.suggestion for f in alone) == 2     # recommend's plain report names the command
    beside = distributed.rank_findings(tables(), per_node=True)
    assert [f.title for f in beside] == [f.title for f in alone]
    assert not any("--per-node" in f.suggestion for f in beside)
    assert sum("per-node plans above" in f.suggestion for f in beside) == 2
