"""The case studies' slow tier (case_studies/slowfs.c): `tfdarshan probe`
finds at least the latency it was configured for and no more than its
bandwidth cap, and serving costs the daemon little CPU (it sleeps, never
spins). Only what sleeping guarantees is asserted: a loaded machine makes
every call slower, never faster. How close the probes come to the
configured figures, and how well they agree, are measurements:
benchmarks/bench_slow_tier.py."""
import os
import time

import pytest

import slow_tier

pytestmark = pytest.mark.timeout(300)

MiB = 2**20
TIMER = 0.02            # the daemon's timer may wake a little early


@pytest.fixture(autouse=True)
def _needs_tier():
    slow_tier.skip_unless_available()


def _probe(mnt):
    from tfdarshan.advice import tiers
    return tiers.probe(mnt, size=16 << 20, opens=10, small_reads=8, repeats=1)


def test_a_probe_pays_at_least_the_configured_latencies(tmp_path):
    from case_studies.slowfs import mounted
    (tmp_path / "root").mkdir()
    meta, read = 0.005, 0.010
    with mounted(str(tmp_path / "root"), str(tmp_path / "mnt"), meta_latency=meta, read_latency=read,
                 bandwidth="0") as mnt:
        p = _probe(mnt)
    # the probe opens <mount>/<probe dir>/<file>: a lookup of each of the
    # two components (attribute and entry timeouts are 0) and the open
    assert p.open_latency >= 3 * meta * (1 - TIMER), p
    # the probe takes a 4 KiB transfer at its measured bandwidth off each read's time
    assert p.read_latency + 4096 / p.bandwidth >= read * (1 - TIMER), p


def test_bandwidth_is_capped_and_the_daemon_sleeps(tmp_path):
    from case_studies.slowfs import cpu_seconds, mounted
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "big.bin").write_bytes(os.urandom(32 * MiB))
    with mounted(str(tmp_path / "root"), str(tmp_path / "mnt"), meta_latency=0, read_latency=0,
                 bandwidth="40M") as mnt:
        p = _probe(mnt)
        # the daemon's CPU over reads alone (the probe's open-rate phase makes it
        # answer thousands of opens a second, which is work, not waiting)
        c, t = cpu_seconds(mnt.pid), time.monotonic()
        with open(os.path.join(mnt, "big.bin"), "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
        elapsed, cpu = time.monotonic() - t, cpu_seconds(mnt.pid) - c
    assert p.bandwidth <= 40 * MiB * (1 + TIMER), p
    # 32 MiB at 40 MiB/s take at least 0.8 s; a daemon that spun while it
    # waits would use about that much CPU, one that sleeps a small share
    assert elapsed >= 0.8 * (1 - TIMER) and cpu < 0.3 * elapsed, (elapsed, cpu)


def test_writes_and_fsync_pay_their_latency(tmp_path):
    from case_studies.slowfs import mounted
    (tmp_path / "root").mkdir()
    with mounted(str(tmp_path / "root"), str(tmp_path / "mnt"), meta_latency=0, read_latency=0, bandwidth="0",
                 write_latency=0, write_bandwidth="20M", fsync_latency=0.2) as mnt:
        with open(os.path.join(mnt, "f"), "wb") as f:
            t = time.perf_counter()
            f.write(os.urandom(4 * MiB))
            f.flush()
            wrote = time.perf_counter() - t
            t = time.perf_counter()
            os.fsync(f.fileno())
            synced = time.perf_counter() - t
    assert wrote >= 0.2 * (1 - TIMER), wrote          # 4 MiB at 20 MiB/s
    assert synced >= 0.2 * (1 - TIMER), synced
