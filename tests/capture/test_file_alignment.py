"""POSIX_FILE_ALIGNMENT (the file system's block size) without a statfs(2)
per new file: one per directory, and none in a forked child for the files
its parent knew.

A statfs walks the path and, on a shared file system, asks the server: once
per new file it doubled the metadata cost of a job reading many new files
(4.3 ms a file on the slow tier with its 4 ms metadata latency). Each case
runs a script under `strace -f -e trace=statfs` and counts the calls naming
the test's own files, which nothing but the shim asks about; the block sizes
the shim recorded are compared with os.statvfs's, asked by the test."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from tests.helpers import slow_tier

PRELUDE = textwrap.dedent("""
    import json, os, sys, time
    import tfdarshan

    def read(path):
        with open(path, "rb") as f:
            f.read()

    def report(**kw):
        print(json.dumps(kw), flush=True)

    def alignments(snap):
        df = snap.posix
        return {p: int(a) for p, a in zip(df["path"], df["POSIX_FILE_ALIGNMENT"])}
""")


def strace_works() -> str:
    if not shutil.which("strace"):
        return "strace is not installed (make system-deps installs it)"
    r = subprocess.run(["strace", "-f", "-o", os.devnull, "true"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"strace cannot trace here: {r.stderr.strip()[:200]}"
    return ""


@pytest.fixture
def traced(tmp_path):
    """Run a script under strace; return its JSON lines and its statfs
    calls as (pid, path) pairs."""
    why = strace_works()
    if why:
        pytest.skip(why)

    def run(body: str, *args, timeout=240):
        script = tmp_path / "case.py"
        script.write_text(PRELUDE + textwrap.dedent(body))
        trace = tmp_path / "statfs.trace"
        r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=statfs", "-o", str(trace),
                            sys.executable, str(script), *map(str, args)],
                           capture_output=True, text=True, timeout=timeout)
        assert r.returncode == 0, r.stderr[-3000:]
        lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
        calls = []
        for line in trace.read_text(errors="replace").splitlines():
            m = re.match(r'(\d+)\s+statfs\("([^"]*)"', line)
            if m:
                calls.append((int(m.group(1)), m.group(2)))
        return lines, calls
    return run


def make_files(root, dirs: int, per_dir: int):
    paths = []
    for d in range(dirs):
        sub = root / f"d{d}"
        sub.mkdir(parents=True)
        for i in range(per_dir):
            p = sub / f"f{i}.bin"
            p.write_bytes(b"x" * (100 + i))
            paths.append(str(p))
    return paths


def under(calls, root) -> list:
    return [c for c in calls if c[1].startswith(str(root) + "/")]


def test_one_statfs_a_directory_and_the_block_size_statvfs_gives(traced, tmp_path):
    disk = make_files(tmp_path / "disk", dirs=3, per_dir=25)
    shm_root = tmp_path / "unused"
    shm = []
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        shm_root = Path(tempfile.mkdtemp(prefix="tfd-align-", dir="/dev/shm"))
        shm = make_files(shm_root, dirs=1, per_dir=25)
    try:
        files = disk + shm
        (tmp_path / "list.json").write_text(json.dumps(files))
        out, calls = traced("""
            files = json.load(open(sys.argv[1]))
            tfdarshan.attach()
            for p in files:
                read(p)
            report(alignments=alignments(tfdarshan.snapshot()))
        """, tmp_path / "list.json")
        got = out[-1]["alignments"]
        for p in files:
            assert got[p] == os.statvfs(p).f_bsize, p
        asked = under(calls, tmp_path / "disk") + under(calls, shm_root)
        dirs = {os.path.dirname(p) for p in files}
        # at most one per directory (it was one per file: 100 here)
        assert len(asked) <= len(dirs), asked
    finally:
        if shm:
            shutil.rmtree(shm_root, ignore_errors=True)


def test_a_forked_child_asks_nothing_of_its_parents_files(traced, tmp_path):
    files = make_files(tmp_path / "disk", dirs=2, per_dir=40)
    fresh_dir = tmp_path / "disk" / "child_only"
    fresh_dir.mkdir()
    (fresh_dir / "c.bin").write_bytes(b"c" * 10)
    (tmp_path / "disk" / "d0" / "late.bin").write_bytes(b"l" * 10)
    out, calls = traced("""
        d = sys.argv[1]
        files = sorted(os.path.join(d, s, f) for s in ("d0", "d1") for f in os.listdir(os.path.join(d, s))
                       if f != "late.bin")
        tfdarshan.attach()
        for p in files:
            read(p)
        pid = os.fork()
        if pid == 0:
            read(os.path.join(d, "d0", "late.bin"))      # a directory the parent knew
            read(os.path.join(d, "child_only", "c.bin"))  # one it did not
            report(who="child", pid=os.getpid(), alignments=alignments(tfdarshan.snapshot()))
            os._exit(0)
        os.waitpid(pid, 0)
        report(who="parent", pid=os.getpid())
    """, tmp_path / "disk")
    child = next(x for x in out if x["who"] == "child")
    parent = next(x for x in out if x["who"] == "parent")
    for p, a in child["alignments"].items():
        if p.startswith(str(tmp_path)):
            assert a == os.statvfs(p).f_bsize, p
    assert len(files) == 80
    by_child = [c for c in under(calls, tmp_path / "disk") if c[0] == child["pid"]]
    by_parent = [c for c in under(calls, tmp_path / "disk") if c[0] != child["pid"]]
    # the child remade its parent's 80 records and read one new file in a
    # known directory: only the unknown directory is asked about
    assert [os.path.dirname(p) for _, p in by_child] in ([], [str(fresh_dir)]), by_child
    assert len(by_parent) <= 2, by_parent
    assert parent["pid"] != child["pid"]


def test_a_mount_made_while_attached_is_asked_once_a_directory(traced, tmp_path):
    """The slow tier mounted after attach: its files get the block size
    statvfs gives there, at one statfs for their directory (each walks the
    path through the FUSE daemon). The collector never opens a descriptor
    to watch the mount table: test_semantics' replays caught the numbers
    the program's own opens got shifting when it did."""
    slow_tier.skip_unless_available()
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    for i in range(6):
        (root / "d" / f"s{i}.bin").write_bytes(b"s" * (1000 + i))
    out, calls = traced("""
        sys.path.insert(0, sys.argv[3])
        from case_studies.slowfs import mounted
        root, mnt = sys.argv[1], sys.argv[2]
        tfdarshan.attach()
        with mounted(root, mnt, meta_latency=0, read_latency=0):
            for n in sorted(os.listdir(os.path.join(mnt, "d"))):
                read(os.path.join(mnt, "d", n))
            report(alignments=alignments(tfdarshan.snapshot()))
    """, root, tmp_path / "mnt", os.getcwd())
    got = out[-1]["alignments"]
    slow = [str(tmp_path / "mnt" / "d" / f"s{i}.bin") for i in range(6)]
    want = os.statvfs(root / "d").f_bsize     # the daemon answers with its backing directory's
    assert [got[p] for p in slow] == [want] * 6
    asked = under(calls, tmp_path / "mnt")
    assert len(asked) == 1, asked
