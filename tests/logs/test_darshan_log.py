"""Genuine Darshan logs: round trip through PyDarshan, darshan summary,
DXT against the counters, and logs that are not what they claim to be."""
import os
import pathlib
import random
import re
import subprocess
import sys
import textwrap
import zlib

import darshan
import numpy as np
import pandas as pd
import pytest

import tfdarshan
from libdarshan_util_writer import write_with_libdarshan_util
from tfdarshan.capture import counters as C
from tfdarshan.capture._native import darshan_hash
from tfdarshan.capture.snapshot import Snapshot, empty_dxt, empty_extra, empty_values
from tfdarshan.logs.darshan_format import HEADER, MOD
from tfdarshan.logs.darshan_writer import STREAM_RECORDS
from tfdarshan.logs.darshan_log import check_log, read_darshan_log, write_darshan_log
from tfdarshan.errors import DarshanLogError


def _shifted(v, t0):
    return np.where(v != 0, v - t0, 0.0)


@pytest.fixture(scope="module")
def traced_window(tf, tmp_path_factory):
    """A real TensorFlow pipeline profiled with the per-operation trace on."""
    d = tmp_path_factory.mktemp("tfdata")
    rng = np.random.default_rng(3)
    files = []
    for i in range(3):
        p = d / f"shard-{i}.tfrecord"
        with tf.io.TFRecordWriter(str(p)) as w:
            for _ in range(60 + 40 * i):
                w.write(rng.bytes(int(rng.integers(2000, 20000))))
        files.append(str(p))
    imgs = []
    for i in range(20):
        p = d / f"img{i}.bin"
        p.write_bytes(rng.bytes(int(rng.integers(100, 50000))))
        imgs.append(str(p))
    was = tfdarshan.is_attached()
    tfdarshan.detach()
    tfdarshan.attach(trace=True)
    try:
        with tfdarshan.profile() as prof:
            n = sum(1 for _ in tf.data.TFRecordDataset(files))
            m = sum(1 for _ in tf.data.Dataset.from_tensor_slices(imgs).map(tf.io.read_file))
            out = d / "written.tfrecord"
            with tf.io.TFRecordWriter(str(out)) as w:
                w.write(b"abc" * 1000)
    finally:
        tfdarshan.detach()
        if was:
            tfdarshan.attach()
    assert n > 0 and m == 20
    return prof.snapshot, files + imgs


def test_round_trip_every_counter(traced_window, tmp_path):
    snap, files = traced_window
    log = write_darshan_log(snap, tmp_path / "w.darshan")
    assert oct(os.stat(log).st_mode & 0o777) == "0o400"
    t0 = snap.start
    with darshan.DarshanReport(str(log), read_all=True) as r:
        names = dict(r.name_records)
        mounts = list(r.mounts)
        for module in ("POSIX", "STDIO"):
            recs = r.records[module].to_df()
            got_c = recs["counters"].set_index("id")
            got_f = recs["fcounters"].set_index("id")
            want = snap.frame(module).set_index("record_id")
            assert sorted(int(i) for i in got_c.index) == sorted(int(i) for i in want.index)
            ints, floats = C.names(module)
            for rid, row in want.iterrows():
                assert names[int(rid)] == row["path"]
                for c in ints:
                    assert int(got_c.loc[rid, c]) == int(row[c]), (module, row["path"], c)
                for c in floats:
                    expect = row[c]
                    if C.kind(module, c) in (C.FIRST, C.LAST):
                        expect = _shifted(np.array([expect]), t0)[0]
                    assert got_f.loc[rid, c] == pytest.approx(expect, rel=1e-12, abs=1e-9), (module, c)
    assert any(m[1] for m in mounts), "the mount table should be in the log"
    assert set(files) <= set(names.values())


def test_reader_returns_the_snapshot(traced_window, tmp_path):
    snap, files = traced_window
    back = read_darshan_log(write_darshan_log(snap, tmp_path / "r.darshan"))
    for module in ("POSIX", "STDIO"):
        a = snap.frame(module).set_index("record_id").sort_index()
        b = back.frame(module).set_index("record_id").sort_index()
        ints, _ = C.names(module)
        assert (a[list(ints)].to_numpy() == b[list(ints)].to_numpy()).all()
        assert list(a["path"]) == list(b["path"])
    assert len(back.dxt) == len(snap.dxt)
    assert back.meta["end"] == pytest.approx(snap.end - snap.start, abs=1e-6)
    assert back.heat["bytes"].sum() == snap.heat[snap.heat["kind"].isin([0, 1, 2, 3])]["bytes"].sum()


def test_dxt_matches_posix_counters(traced_window):
    snap, files = traced_window
    dxt = snap.dxt
    posix = snap.posix.set_index("record_id")
    assert snap.meta["trace_dropped"] == 0
    for rid, row in posix.iterrows():
        seg = dxt[dxt["record_id"] == rid]
        reads, writes = seg[seg["op"] == "read"], seg[seg["op"] == "write"]
        assert len(reads) == row["POSIX_READS"] and reads["length"].sum() == row["POSIX_BYTES_READ"]
        assert len(writes) == row["POSIX_WRITES"] and writes["length"].sum() == row["POSIX_BYTES_WRITTEN"]


def test_darshan_summary_renders_heatmap_and_tables(traced_window, tmp_path):
    snap, files = traced_window
    log = write_darshan_log(snap, tmp_path / "s.darshan")
    html = tmp_path / "s.html"
    r = subprocess.run([sys.executable, "-m", "darshan", "summary", str(log), "--output", str(html)],
                       capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    text = html.read_text()
    assert "Heatmap data is not available" not in text
    assert "Heat Map: HEATMAP POSIX" in text
    assert "Heat Map: DXT_POSIX" in text
    # the per-file sections: file counts and the commonest access sizes
    for heading in ("Per-Module Statistics: POSIX", "File Count Summary", "Common Access Sizes"):
        assert heading in text


def test_tiny_trace_memory_counts_every_drop(tmp_path):
    p = tmp_path / "many.bin"
    p.write_bytes(os.urandom(4096))
    code = textwrap.dedent(f"""
        import os, tfdarshan
        tfdarshan.attach(trace=True, trace_memory=30000)   # room for one chunk of segments
        fd = os.open({str(p)!r}, os.O_RDONLY)
        with tfdarshan.profile() as prof:
            for _ in range(2000):
                os.pread(fd, 64, 0)
        s = prof.snapshot
        r = s.posix[s.posix["path"] == {str(p)!r}].iloc[0]
        kept = int((s.dxt["record_id"] == r["record_id"]).sum())
        print(int(r["POSIX_READS"]), kept, s.meta["trace_dropped"])
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    reads, kept, dropped = map(int, out.stdout.split())
    assert reads == 2000
    assert 0 < kept < 2000
    assert kept + dropped == 2000


# ------------------------------------------------------------- bad input
def _good_log(tmp_path, traced_window):
    return write_darshan_log(traced_window[0], tmp_path / "good.darshan")


@pytest.mark.parametrize("make, message", [
    (lambda p, good: p.write_bytes(good.read_bytes()[: len(good.read_bytes()) // 2]), "truncated"),
    (lambda p, good: p.write_bytes(good.read_bytes()[:8] + b"\x00" * 8 + good.read_bytes()[16:]), "corrupted"),
    (lambda p, good: p.write_bytes(b""), "empty"),
    (lambda p, good: p.mkdir(), "directory"),
    (lambda p, good: None, "no such file"),
    (lambda p, good: p.write_text("just some text, not a log\n"), "not a Darshan log"),
])
def test_bad_logs_give_one_clear_error(tmp_path, traced_window, make, message):
    good = _good_log(tmp_path, traced_window)
    bad = tmp_path / "bad.darshan"
    make(bad, good)
    with pytest.raises(DarshanLogError) as e:
        read_darshan_log(bad)
    assert str(bad) in str(e.value) and message in str(e.value)
    assert "\n" not in str(e.value)


def test_fuzzed_logs_never_crash_the_interpreter(tmp_path, traced_window):
    """Hundreds of mutated logs: each is read or refused with our error; the
    checks run in a child so a crash inside Darshan's C code would show."""
    good = _good_log(tmp_path, traced_window).read_bytes()
    rng = random.Random(1234)
    fuzz = tmp_path / "fuzz"
    fuzz.mkdir()
    for i in range(300):
        data = bytearray(good)
        kind = i % 4
        if kind == 0:                                   # flip bytes anywhere
            for _ in range(rng.randint(1, 8)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif kind == 1:                                 # header fields
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(8, 1328)] = rng.randrange(256)
        elif kind == 2:                                 # truncate
            data = data[: rng.randrange(len(data))]
        else:                                           # splice random bytes into a region
            at = rng.randrange(1328, len(data))
            data[at:at + 16] = bytes(rng.randrange(256) for _ in range(16))
        (fuzz / f"m{i:03d}.darshan").write_bytes(bytes(data))
    code = textwrap.dedent(f"""
        import glob, sys
        from tfdarshan.logs.darshan_log import read_darshan_log
        from tfdarshan.errors import DarshanLogError
        ok = refused = 0
        for p in sorted(glob.glob({str(fuzz)!r} + "/*.darshan")):
            try:
                read_darshan_log(p)
                ok += 1
            except DarshanLogError as e:
                assert p in str(e)
                refused += 1
        print(ok, refused)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    ok, refused = map(int, r.stdout.split())
    assert ok + refused == 300
    assert refused > 100


def test_existing_log_is_not_overwritten(tmp_path, traced_window):
    log = _good_log(tmp_path, traced_window)
    before = log.read_bytes()
    with pytest.raises(DarshanLogError, match="already exists"):
        write_darshan_log(traced_window[0], log)
    assert log.read_bytes() == before


def test_site_darshan_log_reads(tmp_path):
    """Logs written by a site-wide Darshan runtime (PyDarshan's examples)."""
    import glob
    logs = glob.glob(os.path.join(darshan.__path__[0], "examples", "example_logs", "*.darshan"))
    assert logs
    for log in logs:
        info = check_log(log)
        snap = read_darshan_log(log)
        with darshan.DarshanReport(log, read_all=False) as r:
            has_posix = "POSIX" in r.modules
        if has_posix:
            assert len(snap.posix) > 0
            assert (snap.posix["POSIX_BYTES_READ"] >= 0).all()
        assert info["version"].startswith("3.")


# ------------------------------------------- our writer against libdarshan-util
# Every log is written by our own parallel writer (log_stream); the log
# libdarshan-util writes from the same snapshot is the oracle.


def _streams(raw):
    """The zlib streams of a region, each inflated (the test's own inflater)."""
    out = []
    while raw:
        z = zlib.decompressobj()
        out.append(z.decompress(raw))
        assert z.eof, "a stream ends early"
        raw = z.unused_data
    return out


def _regions(path):
    """{region: its streams inflated} and the header's flags and module versions."""
    data = path.read_bytes()
    h = HEADER.unpack_from(data)
    names = (h[4], h[5])
    mods = {i: (h[6 + 2 * i], h[7 + 2 * i]) for i in range(64) if h[7 + 2 * i]}
    job_end = names[0] or min(off for off, _ in mods.values())
    spans = {"job": (HEADER.size, job_end - HEADER.size), "names": names, **mods}
    return ({k: _streams(data[off:off + n]) for k, (off, n) in spans.items() if n},
            (h[0], h[1], h[2], h[3], tuple(h[6 + 128:])))


def _many_records(n, nprocs):
    """A job's worth of records with every counter random, a rank each, in POSIX and STDIO."""
    rng = np.random.default_rng(7)
    frames = {}
    for module, stem in (("POSIX", "/data/p"), ("STDIO", "/data/s")):
        ints, floats = C.names(module)
        paths = [f"{stem}/{i:06d}.bin" for i in range(n)]
        f = pd.DataFrame({"record_id": np.array([darshan_hash(p) for p in paths], dtype=np.uint64),
                          "path": pd.Series(paths, dtype=object), "rank": rng.integers(0, nprocs, n)})
        for c in ints:
            f[c] = rng.integers(0, 1 << 40, n)
        for c in floats:
            f[c] = rng.random(n) * 100
        frames[module] = f
    meta = {"origin_unix_time": 1.7e9, "start": 0.0, "end": 150.0, "hostname": "node1", "pid": 1}
    return Snapshot(frames["POSIX"], frames["STDIO"], empty_values(), empty_extra(), empty_dxt(), meta)


@pytest.fixture(scope="module")
def both_writers(traced_window, tmp_path_factory):
    """(ours, libdarshan-util's) logs of the traced TensorFlow window and of
    a job's worth of records (several streams a module, a rank a record)."""
    d = tmp_path_factory.mktemp("writers")
    args = dict(exe="train.py --epochs 1", jobid=42, metadata={"job": "t"})
    big = _many_records(2 * STREAM_RECORDS + 100, nprocs=4)
    out = {}
    for what, snap, extra in (("traced", traced_window[0], {}), ("many", big, {"nprocs": 4})):
        out[what] = (write_darshan_log(snap, d / f"{what}.ours.darshan", **args, **extra),
                     write_with_libdarshan_util(snap, d / f"{what}.lib.darshan", **args, **extra))
    return out


@pytest.mark.parametrize("what", ["traced", "many"])
def test_our_writer_stores_what_libdarshan_util_stores(both_writers, what):
    ours, lib = both_writers[what]
    got, got_header = _regions(ours)
    want, want_header = _regions(lib)
    assert got_header == want_header        # version, magic, zlib, not partial, module versions
    assert sorted(got, key=str) == sorted(want, key=str)
    for region in want:
        assert b"".join(got[region]) == b"".join(want[region]), region
    assert oct(os.stat(ours).st_mode & 0o777) == "0o400"
    if what == "traced":
        assert {MOD["POSIX"], MOD["STDIO"], MOD["DXT_POSIX"], MOD["HEATMAP"]} <= set(got)
    else:
        # records deflated a stream per STREAM_RECORDS, on several threads
        record = len(b"".join(want[MOD["POSIX"]])) // (2 * STREAM_RECORDS + 100)
        assert [len(s) // record for s in got[MOD["POSIX"]]] == [STREAM_RECORDS, STREAM_RECORDS, 100]


def _plain(x):
    """PyDarshan's answers as plain values, to compare two logs'."""
    if isinstance(x, pd.DataFrame):
        return {"columns": list(x.columns), "rows": x.to_numpy().tolist()}
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    return x


def _report(path):
    """What PyDarshan reads of a log: names, mounts, job, command line and every module's records."""
    with darshan.DarshanReport(str(path), read_all=True) as r:
        return _plain({"names": dict(r.name_records), "mounts": list(r.mounts), "job": dict(r.metadata["job"]),
                       "exe": r.metadata["exe"], "modules": sorted(r.modules),
                       **{m: r.records[m].to_df() for m in r.records},
                       "heatmaps": {k: h.to_df(ops=["read", "write"]) for k, h in r.heatmaps.items()}})


@pytest.mark.parametrize("what", ["traced", "many"])
def test_pydarshan_reads_ours_as_libdarshan_utils(both_writers, what):
    ours, lib = both_writers[what]
    got, want = _report(ours), _report(lib)
    assert got == want
    assert want["names"] and (what != "traced" or ({"DXT_POSIX", "HEATMAP"} <= set(want["modules"])
                                                   and want["DXT_POSIX"] and want["heatmaps"]["POSIX"]["rows"]))


@pytest.mark.parametrize("what", ["traced", "many"])
def test_our_reader_and_checker_read_ours_as_libdarshan_utils(both_writers, what):
    ours, lib = both_writers[what]
    assert check_log(ours) == check_log(lib)
    got, want = read_darshan_log(ours), read_darshan_log(lib)
    for frame in ("posix", "stdio", "dxt", "heat"):
        pd.testing.assert_frame_equal(getattr(got, frame), getattr(want, frame))
    assert {k: v for k, v in got.meta.items() if k != "log"} == {k: v for k, v in want.meta.items() if k != "log"}


def test_drishti_reads_ours_as_libdarshan_utils(both_writers):
    drishti = pathlib.Path(sys.executable).parent / "drishti"
    assert drishti.exists(), "drishti is missing (make test installs drishti-io with the test extra)"

    def report(log):
        d = subprocess.run([str(drishti), str(log)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "COLUMNS": "120"})
        assert d.returncode == 0, d.stderr[-2000:]
        # all but the lines naming the file and the report's own time
        return [ln for ln in d.stdout.splitlines() if "DARSHAN:" not in ln and "report generated" not in ln]
    ours, lib = both_writers["traced"]
    got = report(ours)
    assert got == report(lib)
    assert any(re.search(r"PROCESSES\s+1\b", ln) for ln in got)


def test_a_write_that_fails_leaves_no_file_and_says_why(tmp_path, traced_window):
    """A log that cannot be written whole (here the file size limit, as a
    full disk or a quota would) raises one clear error and leaves nothing
    behind, neither the log nor its temporary file."""
    whole = write_darshan_log(traced_window[0], tmp_path / "whole.darshan").stat().st_size
    out = tmp_path / "cut"
    out.mkdir()
    code = textwrap.dedent(f"""
        import resource, signal
        from tfdarshan.errors import DarshanLogError
        from tfdarshan.logs.darshan_log import read_darshan_log, write_darshan_log
        snap = read_darshan_log({str(tmp_path / 'whole.darshan')!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # past the limit: EFBIG, not a signal
        resource.setrlimit(resource.RLIMIT_FSIZE, ({whole // 2}, {whole // 2}))
        try:
            write_darshan_log(snap, {str(out / 'x.darshan')!r})
        except DarshanLogError as e:
            print(e)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    message = r.stdout.strip()
    assert message.startswith(str(out / "x.darshan")) and "cannot write the log" in message, message
    assert "\n" not in message
    assert not list(out.iterdir())


def test_metadata_past_its_room_keeps_whole_lines_and_names_the_rest(tmp_path):
    """Darshan's job record holds 1,022 bytes of "key=value" lines. A value
    cut short reads back as another value (CPU ranges "0-3,8,1" for
    "0-3,8,10..."; a shorter list of ranks), so what does not fit is left out
    whole and named, and every value a reader gets is the one written."""
    cpus = ",".join(f"{4 * i}-{4 * i + 1}" for i in range(120))          # ~1.1 KB: never fits
    given = {"rank": "3", "cpus": cpus, "node_cpus": "512", "hosts": ",".join(f"nid{i:05d}" for i in range(60)),
             "partial_ranks": "1,2,10", "skipped": "0"}
    log = write_darshan_log(_many_records(8, 1), tmp_path / "m.darshan", metadata=given)
    with darshan.DarshanReport(str(log), read_all=False) as r:
        read = dict(r.metadata["job"]["metadata"])
    lines = sum(len(f"{k}={v}\n") for k, v in read.items())
    assert lines <= 1022
    kept = {k: v for k, v in given.items() if k in read}
    assert all(read[k] == v for k, v in kept.items()), "a value reads back as written or not at all"
    assert "cpus" not in read and "cpus" in read["omitted"].split(",")
    # the hosts' line (~600 bytes) fits once the CPU ranges are out; the short ones after it too
    assert set(kept) == set(given) - {"cpus"}
    assert set(read["omitted"].split(",")) == set(given) - set(kept)
