"""Kernel-side copies (copy_file_range, sendfile, splice), which Darshan's
wrappers never see, are counted with their exact bytes and time per file
and per step, in tfdarshan's own columns (capture/kernel_io.py); Darshan's
counters stay what Darshan 3.5 writes; the new wrappers change no call's
outcome. Expected byte counts come from the files' sizes and the calls'
own return values, never from the shim."""
import errno
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import tfdarshan
from counters import row
from test_semantics import op, replay, semops, workdir  # noqa: F401  (fixtures)

MIB = 1 << 20


def make(path, size):
    path.write_bytes(os.urandom(size))
    return path


def window(fn):
    """The snapshot of what fn did (the shim attached around it)."""
    before = tfdarshan.snapshot()
    fn()
    return tfdarshan.snapshot() - before


def extra_row(snap, path):
    return row(snap.extra, path)


def test_shutil_copyfile_counts_every_byte_on_both_files(attached, tmp_path):
    size = 5 * MIB + 123
    src, dst = make(tmp_path / "src.bin", size), tmp_path / "dst.bin"
    snap = window(lambda: shutil.copyfile(src, dst))
    assert dst.read_bytes() == src.read_bytes()
    s, d = extra_row(snap, src), extra_row(snap, dst)
    assert (s["COPY_BYTES_READ"], s["COPY_BYTES_WRITTEN"]) == (size, 0)
    assert (d["COPY_BYTES_READ"], d["COPY_BYTES_WRITTEN"]) == (0, size)
    # Python copies with sendfile (or copy_file_range, in newer versions): one of them moved it all
    assert s["SENDFILE_BYTES"] + s["COPY_FILE_RANGE_BYTES"] == size
    assert s["SPLICE_BYTES"] == 0 and s["MMAP_BYTES"] == 0
    # timed once per call: on the source (read side); the destination's write side has the same calls
    assert s["COPY_READ_TIME"] > 0 and s["COPY_TIME"] == s["COPY_READ_TIME"]
    assert d["COPY_WRITE_TIME"] == pytest.approx(s["COPY_READ_TIME"]) and d["COPY_TIME"] == 0
    # Darshan 3.5 sees the opens and none of these bytes: neither do its counters here
    p, q = row(snap.posix, src), row(snap.posix, dst)
    assert (p["POSIX_OPENS"], p["POSIX_BYTES_READ"], q["POSIX_BYTES_WRITTEN"]) == (1, 0, 0)


def test_os_sendfile_with_offsets_and_a_short_call_at_the_end(attached, tmp_path):
    size = 3 * MIB + 4000
    src = make(tmp_path / "in.bin", size)
    sent = []

    def copy():
        with open(src, "rb") as fi, open(tmp_path / "out.bin", "wb") as fo:
            sent.append(os.sendfile(fo.fileno(), fi.fileno(), 1000, 2 * MIB))
            sent.append(os.sendfile(fo.fileno(), fi.fileno(), size - 100, 4096))   # short: 100 bytes left
            sent.append(os.sendfile(fo.fileno(), fi.fileno(), size, 4096))         # at the end: 0
    snap = window(copy)
    assert sent == [2 * MIB, 100, 0]
    assert (tmp_path / "out.bin").read_bytes() == src.read_bytes()[1000:1000 + 2 * MIB] + src.read_bytes()[-100:]
    s, d = extra_row(snap, src), extra_row(snap, tmp_path / "out.bin")
    assert s["COPY_BYTES_READ"] == s["SENDFILE_BYTES"] == sum(sent)
    assert d["COPY_BYTES_WRITTEN"] == d["SENDFILE_BYTES"] == sum(sent)


def test_os_copy_file_range_to_the_end(attached, tmp_path):
    size = 6 * MIB + 77
    src = make(tmp_path / "from.bin", size)
    moved = []

    def copy():
        fi, fo = os.open(src, os.O_RDONLY), os.open(tmp_path / "to.bin", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while n := os.copy_file_range(fi, fo, 1 * MIB):
                moved.append(n)
        finally:
            os.close(fi)
            os.close(fo)
    snap = window(copy)
    assert sum(moved) == size
    assert (tmp_path / "to.bin").read_bytes() == src.read_bytes()
    s, d = extra_row(snap, src), extra_row(snap, tmp_path / "to.bin")
    assert s["COPY_BYTES_READ"] == s["COPY_FILE_RANGE_BYTES"] == size
    assert d["COPY_BYTES_WRITTEN"] == d["COPY_FILE_RANGE_BYTES"] == size
    # copy_file_range used the files' positions: Darshan's record of them is as if nothing happened
    assert row(snap.posix, src)["POSIX_BYTES_READ"] == 0


def test_splice_through_a_pipe_counts_the_file_ends(attached, tmp_path):
    size = 300 * 1024 + 5
    src = make(tmp_path / "spliced.bin", size)
    into = []

    def copy():
        r, w = os.pipe()
        fi, fo = os.open(src, os.O_RDONLY), os.open(tmp_path / "joined.bin", os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while n := os.splice(fi, w, 64 * 1024):
                into.append(n)
                left = n
                while left:
                    left -= os.splice(r, fo, left)
        finally:
            for fd in (r, w, fi, fo):
                os.close(fd)
    snap = window(copy)
    assert sum(into) == size and (tmp_path / "joined.bin").read_bytes() == src.read_bytes()
    s, d = extra_row(snap, src), extra_row(snap, tmp_path / "joined.bin")
    assert (s["COPY_BYTES_READ"], s["SPLICE_BYTES"]) == (size, size)
    assert (d["COPY_BYTES_WRITTEN"], d["SPLICE_BYTES"]) == (size, size)
    assert s["COPY_TIME"] > 0 and d["COPY_TIME"] > 0     # each call has one recorded end: its own


def test_copies_land_in_the_step_that_made_them(tmp_path):
    sizes = [MIB + 1, 2 * MIB + 2, 0]
    srcs = [make(tmp_path / f"s{i}.bin", n) for i, n in enumerate(sizes)]
    with tfdarshan.profile() as p:
        for i, src in enumerate(srcs):
            with tfdarshan.step(i):
                shutil.copyfile(src, tmp_path / f"d{i}.bin")
    steps = p.steps.set_index("step")
    assert [int(steps.at[i, "copy_bytes_read"]) for i in range(3)] == sizes
    assert [int(steps.at[i, "copy_bytes_written"]) for i in range(3)] == sizes
    files = p.step_files
    assert int(files["copy_bytes_read"].sum()) == sum(sizes)
    assert steps.at[1, "copy_time"] > 0
    # the window's totals are the steps' (nothing lost between them)
    e = p.snapshot.extra
    assert int(e["COPY_BYTES_READ"].sum()) == int(steps["copy_bytes_read"].sum())


def test_switched_off_nothing_is_counted(tmp_path):
    src = make(tmp_path / "quiet.bin", MIB)
    was = tfdarshan.is_attached()
    if was:
        tfdarshan.detach()
    try:
        tfdarshan.attach(kernel_io=False)
        snap = window(lambda: shutil.copyfile(src, tmp_path / "quiet-copy.bin"))
    finally:
        tfdarshan.detach()
        if was:
            tfdarshan.attach()
    assert row(snap.posix, src)["POSIX_OPENS"] == 1          # Darshan's counters as ever
    assert not (snap.extra["COPY_BYTES_READ"] + snap.extra["COPY_BYTES_WRITTEN"]).any()


# ------------------------------------------------- the wrappers change nothing

def test_errors_of_the_new_wrappers_are_unchanged(semops, workdir):
    """EINVAL and EBADF come back as they would without the shim (bad fds
    of every new call are also in test_semantics.test_bad_fd)."""
    calls = [
        op("open", slot=0, path="data.bin", a=os.O_RDONLY),
        op("open", slot=1, path="copy.bin", a=os.O_RDWR | os.O_CREAT, b=0o644),
        op("open", slot=4, path="appended.bin", a=os.O_WRONLY | os.O_CREAT | os.O_APPEND, b=0o644),
        op("copy_file_range", slot=1, slot2=0, a=100, b=-1, c=1),         # flags must be 0: EINVAL
        op("copy_file_range", slot=1, slot2=0, a=100, b=0),               # fine: 100 bytes
        op("copy_file_range", slot=4, slot2=0, a=100, b=0),               # O_APPEND target: EBADF
        op("splice", slot=1, slot2=0, a=100, b=0),                        # no pipe end: EINVAL
        op("sendfile", slot=1, slot2=0, a=100, b=6000),                   # past the end: 0
        op("sendfile64", slot=1, slot2=0, a=100, b=10),
        op("sendfile", slot=4, slot2=0, a=100, b=0),                      # O_APPEND target: EINVAL
        op("sendfile", slot=1, slot2=ROOT_SLOT, a=100, b=0),              # a directory: EINVAL
        op("munmap", slot=0, a=8192, c=-2),                               # zero length: EINVAL
        op("munmap", slot=0, a=8192, c=1),                                # not page aligned: EINVAL
        op("munmap", slot=0, a=12288, c=4096),                            # a hole in the middle: fine
    ]
    o = replay(semops, workdir, calls)
    got = [(x.op, x.ret, x.errno) for x in o[3:]]
    assert got == [("copy_file_range", -1, "EINVAL"), ("copy_file_range", 100, 0),
                   ("copy_file_range", -1, "EBADF"), ("splice", -1, "EINVAL"), ("sendfile", 0, 0),
                   ("sendfile64", 100, 0), ("sendfile", -1, "EINVAL"), ("sendfile", -1, "EINVAL"),
                   ("munmap", -1, "EINVAL"), ("munmap", -1, "EINVAL"), ("munmap", 0, 0)], got


ROOT_SLOT = -3     # semops.c: the fd of the run's directory


# ------------------------------------------------ Darshan's counters unchanged

SCRIPT = textwrap.dedent("""
    import os, shutil, sys
    import numpy as np
    import tfdarshan
    d, logdir = sys.argv[1], sys.argv[2]
    src = os.path.join(d, "src.bin")
    with tfdarshan.profile(logdir=logdir):
        shutil.copyfile(src, os.path.join(d, "copy.bin"))
        fi = os.open(src, os.O_RDONLY)
        fo = os.open(os.path.join(d, "out.bin"), os.O_RDWR | os.O_CREAT, 0o644)
        os.read(fi, 4096)                         # Darshan's offset: 4096
        os.sendfile(fo, fi, None, 65536)          # moves the file position, not Darshan's offset
        os.copy_file_range(fi, fo, 65536)
        os.read(fi, 1000)                         # where Darshan thinks this read is decides SEQ/CONSEC
        os.pwrite(fo, b"x" * 100, 10)
        r, w = os.pipe()
        os.splice(fi, w, 4096, offset_src=0)
        os.splice(r, fo, 4096)
        os.write(fo, b"y" * 10)
        for fd in (r, w, fi, fo):
            os.close(fd)
        m = np.memmap(src, dtype=np.uint8, mode="r")
        int(m[: 1 << 20].sum())
        del m
        with open(os.path.join(d, "copy.bin"), "rb") as f:
            f.read(12345)
        a = np.load(os.path.join(d, "arr.npy"), mmap_mode="r")
        float(a.sum())
""")


def run_logged(tmp_path, name, kernel_io):
    """The script's window as a Darshan log, with the new wrappers on or
    off, over the same paths (record ids are hashes of them)."""
    d = tmp_path / "data"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir()
    (d / "src.bin").write_bytes(bytes(range(256)) * (12 * 4096))
    import numpy as np
    np.save(d / "arr.npy", np.arange(300_000, dtype=np.float32))
    logdir = tmp_path / name
    env = {**os.environ, "TFDARSHAN_KERNEL_IO": "1" if kernel_io else "0", "TFDARSHAN_NO_HOOKS": "1"}
    r = subprocess.run([sys.executable, "-c", SCRIPT, str(d), str(logdir)], env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    (log,) = logdir.glob("plugins/tfdarshan/*/*.darshan")
    return log


def darshan_records(log):
    """PyDarshan's view of a log: {module: {record id: (name, counters, fcounters)}}."""
    import darshan
    report = darshan.DarshanReport(str(log), read_all=True)
    out = {}
    for module in ("POSIX", "STDIO"):
        if module not in report.records:
            out[module] = {}
            continue
        recs = report.records[module].to_df()
        names = report.name_records
        c, f = recs["counters"].set_index("id"), recs["fcounters"].set_index("id")
        out[module] = {int(i): (names[i], c.loc[i].drop("rank").to_dict(), f.loc[i].drop("rank").to_dict())
                       for i in c.index}
    return out


def test_darshan_counters_are_the_same_with_the_new_wrappers_off(tmp_path):
    on = darshan_records(run_logged(tmp_path, "on", kernel_io=True))
    off = darshan_records(run_logged(tmp_path, "off", kernel_io=False))
    for module in ("POSIX", "STDIO"):
        assert on[module].keys() == off[module].keys(), module
        for rid, (name, counters, fcounters) in on[module].items():
            name_off, counters_off, fcounters_off = off[module][rid]
            assert name == name_off
            # the size of the slowest read or write is chosen by time: which one was slowest varies
            diff = {k: (v, counters_off[k]) for k, v in counters.items()
                    if v != counters_off[k] and not k.endswith("_TIME_SIZE")}
            assert not diff, f"{module} {name}: counters differ (on, off): {diff}"
            # times differ from run to run; what was timed at all may not
            timed = {k: (v != 0, fcounters_off[k] != 0) for k, v in fcounters.items()}
            assert all(a == b for a, b in timed.values()), f"{module} {name}: {timed}"
    # and the run with them on did see what Darshan cannot: the copies' bytes are in their own columns
    src = next(c for n, c, _ in on["POSIX"].values() if n.endswith("/src.bin"))
    assert src["POSIX_MMAPS"] >= 1 and src["POSIX_BYTES_READ"] == 4096 + 1000


def test_coverage_names_the_files_darshan_cannot_see_and_counts_the_copies(tmp_path):
    import json
    size = 4 * MIB + 1
    src = make(tmp_path / "cov-src.bin", size)
    with tfdarshan.profile(logdir=str(tmp_path / "logs")) as p:
        shutil.copyfile(src, tmp_path / "cov-dst.bin")
    (cov_file,) = (tmp_path / "logs").glob("plugins/tfdarshan/*/*.coverage.json")
    cov = json.loads(cov_file.read_text())
    assert cov == json.loads(json.dumps(p.snapshot.meta["coverage"]))
    # the kernel counts a sendfile / copy_file_range in rchar and wchar: so do we, beside Darshan's bytes
    assert cov["counted_bytes"] - cov["darshan_bytes"] == 2 * size
    assert cov["share"] > cov["darshan_share"]
    files = {f["path"]: f for f in cov["beyond_darshan"]}
    s, d = files[str(src)], files[str(tmp_path / "cov-dst.bin")]
    assert s["how"] in ("sendfile", "copy_file_range") and d["how"] == s["how"]
    assert (s["bytes_read"], s["bytes_written"], d["bytes_read"], d["bytes_written"]) == (size, 0, 0, size)
    assert cov["beyond_darshan_files"] == 2 and cov["mapped_bytes"] == 0


def test_a_step_series_written_before_these_columns_reads_them_as_zero(tmp_path):
    from tfdarshan.steps import series
    old = {c: [1] for c in series.FILE_COLUMNS if c not in series.OPTIONAL_FIELDS}
    old.update(module=["POSIX"], record_id=[7])
    path = series.write_parquet(__import__("pandas").DataFrame(old), tmp_path / "old.step_files.parquet")
    back = series.read_series(path, series.FILE_COLUMNS)
    assert all(back[c].tolist() == [0] for c in series.OPTIONAL_FIELDS)
    assert back["bytes_read"].tolist() == [1]
