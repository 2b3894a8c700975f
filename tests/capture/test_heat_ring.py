"""The heatmap's per-thread ring across idle gaps longer than it spans.

The shim keeps each thread's fine bins in a ring of 2,048 that the
collector drains (51.2 s of 25 ms bins). The ring used to be a window of
time, so a thread idle for longer than that had every later call refused
into `heat_unbinned`: a traced profile's heatmap was empty and its Darshan
log had no HEATMAP region. It now holds only the bins with bytes.

The script runs in a fresh interpreter with TFDARSHAN_DEBUG_HEAT_BIN_US
(a test knob of the shim: bins that many microseconds wide) set to 250, so
2,048 bins span 0.512 s and each sleep (0.72 s) is a gap wider than that.
Expected bytes are the files' sizes (os.stat) times the reads the script
made; the tests assert on byte counts only, never on durations."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

BIN_US = 250
RING = 2048
SPAN = RING * BIN_US * 1e-6

SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    import darshan
    import numpy as np
    import tfdarshan
    from tfdarshan.logs.darshan_log import write_darshan_log

    d, out_dir, gap = sys.argv[1], sys.argv[2], float(sys.argv[3])
    names = sorted(os.listdir(d))
    sizes = {n: os.stat(os.path.join(d, n)).st_size for n in names}

    def read(name):
        with open(os.path.join(d, name), "rb") as f:
            f.read()
        return sizes[name]

    def read_all(pause=0.0):
        n = 0
        for name in names:
            n += read(name)
            time.sleep(pause)
        return n

    def heat(snap):
        return int(snap.heat["bytes"].sum())

    def unbinned(snap):
        return int(snap.meta["heat_unbinned"])

    report = {}
    tfdarshan.attach()

    # 1. No drain between the bins before the gap and the calls after it:
    # the reads before the gap span several bins, none of them reported yet.
    s0 = tfdarshan.snapshot()
    got = read_all(pause=0.003)
    time.sleep(gap)
    got += read_all()
    s1 = tfdarshan.snapshot()
    report["no_drain"] = {"read": got, "heat": heat(s1) - heat(s0), "unbinned": unbinned(s1) - unbinned(s0)}

    # 2. Two gaps in a row, still with no drain between them.
    got = read_all(pause=0.003)
    time.sleep(gap)
    got += read_all()
    time.sleep(gap)
    got += read_all()
    s2 = tfdarshan.snapshot()
    report["two_gaps"] = {"read": got, "heat": heat(s2) - heat(s1), "unbinned": unbinned(s2) - unbinned(s1)}

    # 3. A ring that fills: reads in every bin for longer than the ring
    # spans, no drain. Whatever the ring cannot hold is counted unbinned,
    # never overwritten or counted twice.
    got, until = 0, time.monotonic() + 1.5 * gap
    while time.monotonic() < until:
        got += read(names[0])
    s3 = tfdarshan.snapshot()
    report["full"] = {"read": got, "heat": heat(s3) - heat(s2), "unbinned": unbinned(s3) - unbinned(s2)}

    # 4. Drains racing a writer: another thread reads, idles past the span
    # and reads again while this one takes snapshot after snapshot.
    import threading
    moved = []
    def reader():
        n, until = 0, time.monotonic() + 0.3
        while time.monotonic() < until:
            n += read(names[1])
        time.sleep(gap)
        until = time.monotonic() + 0.3
        while time.monotonic() < until:
            n += read(names[1])
        moved.append(n)
    t = threading.Thread(target=reader)
    t.start()
    while t.is_alive():
        tfdarshan.snapshot()
    t.join()
    s4 = tfdarshan.snapshot()
    report["racing"] = {"read": moved[0], "heat": heat(s4) - heat(s3), "unbinned": unbinned(s4) - unbinned(s3)}

    # 5. The bug's case: every bin reported (a snapshot), the thread idle
    # past the ring's span, then a traced profile and its Darshan log.
    read_all()
    tfdarshan.snapshot()
    time.sleep(gap)
    with tfdarshan.profile(trace=True) as p:
        got = read_all()
    snap = p.snapshot
    log = write_darshan_log(snap, os.path.join(out_dir, "window.darshan"))
    r = darshan.DarshanReport(str(log), read_all=True)
    logged = None
    if "HEATMAP" in r.modules:
        r.read_all_heatmap_records()
        logged = {m: {op: int(sum(np.asarray(v, dtype=np.int64).sum() for v in hm._data[op].values()))
                      for op in ("read", "write")} for m, hm in r.heatmaps.items()}
    report["profile"] = {"read": got, "heat": heat(snap),
                         "counted": int(snap.posix["POSIX_BYTES_READ"].sum()),
                         "modules": sorted(r.modules), "logged": logged}
    print(json.dumps(report), flush=True)
""")


@pytest.fixture(scope="module")
def ring_report(tmp_path_factory):
    d = tmp_path_factory.mktemp("heat_ring")
    data = d / "data"
    data.mkdir()
    for i, size in enumerate((65536, 4096, 100000, 1)):
        (data / f"f{i}.bin").write_bytes(os.urandom(size))
    script = d / "case.py"
    script.write_text(SCRIPT)
    env = dict(os.environ, TFDARSHAN_DEBUG_HEAT_BIN_US=str(BIN_US), TFDARSHAN_NO_HOOKS="1")
    r = subprocess.run([sys.executable, str(script), str(data), str(d), str(1.4 * SPAN)],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    sizes = sum(p.stat().st_size for p in data.iterdir())
    return json.loads(r.stdout.strip().splitlines()[-1]), sizes


def test_idle_gap_without_a_drain_loses_no_bytes(ring_report):
    report, sizes = ring_report
    case = report["no_drain"]
    assert case["read"] == 2 * sizes
    assert case == {"read": 2 * sizes, "heat": 2 * sizes, "unbinned": 0}


def test_two_idle_gaps_without_a_drain_lose_no_bytes(ring_report):
    report, sizes = ring_report
    assert report["two_gaps"] == {"read": 3 * sizes, "heat": 3 * sizes, "unbinned": 0}


def test_a_full_ring_counts_every_byte_once(ring_report):
    report, sizes = ring_report
    case = report["full"]
    assert case["read"] > 0 and case["read"] % 65536 == 0
    assert case["heat"] + case["unbinned"] == case["read"]


def test_drains_racing_a_writer_count_every_byte_once(ring_report):
    report, sizes = ring_report
    case = report["racing"]
    assert case["read"] > 0 and case["read"] % 4096 == 0
    assert case["heat"] + case["unbinned"] == case["read"]


def test_traced_profile_after_an_idle_gap_has_its_heatmap(ring_report):
    report, sizes = ring_report
    case = report["profile"]
    assert case["read"] == sizes
    assert case["counted"] == sizes
    assert case["heat"] == sizes
    assert "HEATMAP" in case["modules"]
    assert case["logged"]["POSIX"] == {"read": sizes, "write": 0}
