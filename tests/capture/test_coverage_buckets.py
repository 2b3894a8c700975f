"""Coverage counts what it leaves out by design: bytes on excluded paths
(imports, libraries, system files) go to a bucket of their own, through
POSIX descriptors, their duplicates and STDIO streams, so that data
coverage is the recorded bytes over all but those; the job view has a
coverage card over ranks. Once every rank of a full capture read 49 %
and the job view had no card at all.

With it, the smaller things a user of a four-rank job saw: the standard
streams are not an "unknown mount" without a bar, and the mounts table
counts distinct files, not the ranks' counts summed."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from rank_session import real_session
from tfdarshan.analysis.analyze import analyze, read_table
from tfdarshan.capture import coverage, mounts as M
from tfdarshan.logs.logdir import find_sessions
from tfdarshan_tb import rank_data, rank_views, session_data, views

HELPER = r"""
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
static long drain(int fd) { char b[65536]; long t = 0; ssize_t n; while ((n = read(fd, b, sizeof b)) > 0) t += n; return t; }
long posix_read_whole(const char *p) { int fd = open(p, O_RDONLY); if (fd < 0) return -1; long t = drain(fd); close(fd); return t; }
long dup_read_whole(const char *p) { int fd = open(p, O_RDONLY); if (fd < 0) return -1; int d = dup(fd); close(fd);
                                     long t = drain(d); close(d); return t; }
long stdio_read_whole(const char *p) { FILE *f = fopen(p, "rb"); if (!f) return -1; char b[4096]; long t = 0; size_t n;
                                       while ((n = fread(b, 1, sizeof b, f)) > 0) t += (long)n; fclose(f); return t; }
void say(const char *s) { fputs(s, stderr); fflush(stderr); }
long at_read_whole(const char *dir, const char *name) { int d = open(dir, O_RDONLY | O_DIRECTORY); if (d < 0) return -1;
                                                         int fd = openat(d, name, O_RDONLY); close(d); if (fd < 0) return -1;
                                                         long t = drain(fd); close(fd); return t; }
"""


@pytest.fixture(scope="module")
def helper(tmp_path_factory):
    d = tmp_path_factory.mktemp("helper")
    (d / "helper.c").write_text(HELPER)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", str(d / "helper.c"), "-o", str(d / "libhelper.so")], check=True)
    return d / "libhelper.so"


def test_excluded_bytes_have_their_own_bucket(tmp_path, helper):
    # given data files, and files the default rules exclude (a .py suffix, a .so suffix, a .pyc suffix)
    sizes = {"data.bin": 300_000, "more.bin": 70_000, "mod.py": 120_000, "lib.so": 90_000, "cache.pyc": 50_000}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(os.urandom(size))
    # and a directory excluded by the user, whose file is opened relative to it (as hwloc walks /sys)
    (tmp_path / "private").mkdir()
    (tmp_path / "private" / "inside.bin").write_bytes(os.urandom(40_000))
    script = tmp_path / "probe.py"
    script.write_text(textwrap.dedent(f"""
        import ctypes, json, sys, tfdarshan
        from tfdarshan.capture.recorder import RECORDER
        lib = ctypes.CDLL({str(helper)!r})
        for f in ("posix_read_whole", "dup_read_whole", "stdio_read_whole", "at_read_whole"):
            getattr(lib, f).restype = ctypes.c_long
        tfdarshan.attach()
        warm = RECORDER.open_window()           # what a first window imports is read before this one
        lib.posix_read_whole(b"{tmp_path}/more.bin")
        warm.close()
        w = RECORDER.open_window()
        got = [lib.posix_read_whole(b"{tmp_path}/data.bin"), lib.stdio_read_whole(b"{tmp_path}/more.bin"),
               lib.posix_read_whole(b"{tmp_path}/mod.py"), lib.dup_read_whole(b"{tmp_path}/lib.so"),
               lib.stdio_read_whole(b"{tmp_path}/cache.pyc"), lib.at_read_whole(b"{tmp_path}/private", b"inside.bin")]
        snap = w.close()
        print(json.dumps({{"got": got, "coverage": snap.meta["coverage"],
                          "paths": sorted(snap.posix["path"]) + sorted(snap.stdio["path"])}}))
    """))
    # when
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TFDARSHAN_EXCLUDE": f"{tmp_path}/private/"})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # then: what each call read is in its bucket; the excluded files have no record
    assert out["got"] == [sizes[n] for n in ("data.bin", "more.bin", "mod.py", "lib.so", "cache.pyc")] + [40_000]
    cov = out["coverage"]
    assert cov["counted_bytes"] == 300_000 + 70_000
    excluded = 120_000 + 90_000 + 50_000 + 40_000
    # (plus what the window itself reads of /proc/self/io and mountinfo, excluded paths: a few kB)
    assert excluded <= cov["excluded_bytes"] <= excluded + 8192, cov
    assert not [p for p in out["paths"] if p.endswith((".py", ".so", ".pyc", "inside.bin"))]
    assert cov["unseen_bytes"] <= 0.02 * cov["kernel_bytes"], cov
    assert cov["share"] == pytest.approx(min(cov["counted_bytes"] / (cov["kernel_bytes"] - cov["excluded_bytes"]), 1))
    assert cov["share"] >= 0.98 and cov["share_of_all"] < 0.6
    assert not any("excluded" in b for b in cov["blind_spots"])      # excluded is not a blind spot


RANK_SCRIPT = """
import ctypes, os, sys, tfdarshan
lib = ctypes.CDLL(sys.argv[1])
rank = int(os.environ["SLURM_PROCID"])
lib.say(b"rank starting\\n")                  # a <STDERR> record, on no mount
for step in range(2):
    with tfdarshan.step(step):
        with open(sys.argv[2], "rb") as f:     # every rank reads the shared file
            f.read()
        with open(sys.argv[3 + rank], "rb") as f:
            f.read()
"""


@pytest.fixture(scope="module")
def job(tmp_path_factory, helper):
    root = tmp_path_factory.mktemp("job")
    data = root / "data"
    data.mkdir()
    (data / "shared.bin").write_bytes(os.urandom(100_000))
    own = []
    for r in range(4):
        own.append(data / f"own-{r}.bin")
        own[-1].write_bytes(os.urandom(30_000))
    d = real_session(root, RANK_SCRIPT, [helper, data / "shared.bin", *own], 4)
    analyze(d)
    [s] = find_sessions(root / "logs")
    return d, s, data


def test_the_job_view_has_a_coverage_card_over_ranks(job):
    d, s, _ = job
    records = [json.loads((d / f"{h}.coverage.json").read_text()) for h in s.hosts]
    counted = sum(c["counted_bytes"] for c in records)
    kernel = sum(c["kernel_bytes"] for c in records)
    excluded = sum(c["excluded_bytes"] for c in records)
    assert excluded > 0                        # the script's imports happened inside the window
    card = rank_views.summary(rank_data.RankSessionData(s))["coverage"]
    assert card["processes"] == 4
    assert (card["counted_bytes"], card["kernel_bytes"], card["excluded_bytes"]) == (counted, kernel, excluded)
    assert card["share"] == pytest.approx(min(counted / (kernel - excluded), 1.0), rel=1e-12)
    assert card["lowest"] == pytest.approx(min(c["share"] for c in records), rel=1e-12)
    assert card["unseen_bytes"] == max(kernel - counted - excluded, 0)
    # a full capture of the data reads as one, imports and libraries apart
    assert card["share"] >= 0.9


def test_standard_streams_are_not_an_unknown_mount(job):
    _, s, _ = job
    many = rank_data.RankSessionData(s)
    assert (many.mounts_table["mount"] == M.STREAMS).any()           # the <STDERR> records are there...
    mounts = {m["mount"] for m in rank_views.mounts(many)["mounts"]}
    assert session_data.UNKNOWN_MOUNT not in mounts and M.STREAMS not in mounts  # ...and not storage
    one = session_data.SessionData(s, s.hosts[0])
    assert session_data.UNKNOWN_MOUNT not in {m["mount"] for m in views.mounts(one)["mounts"]}
    table = one.files.set_index("path")
    assert table.at["<STDERR>", "mount"] == M.STREAMS


def test_the_mounts_table_counts_distinct_files(job):
    d, _, data = job
    files = read_table(d, "files")
    mounts = read_table(d, "mounts").set_index("mount")
    ours = files[files["path"].str.startswith(str(data))]
    [mount] = set(ours["mount"])
    # 5 files (the shared one read by all 4 ranks, and one of each rank's own), not 8
    on_mount = files[files["mount"] == mount]
    assert int(mounts.at[mount, "files"]) == on_mount["path"].nunique() and len(ours) == 5
    assert read_table(d, "rank_mounts").query("mount == @mount")["files"].sum() > mounts.at[mount, "files"]
