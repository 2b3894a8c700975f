"""The case studies' slow tier (case_studies/slowfs.c): `tfdarshan probe`
measures what it was configured for, repeated probes agree, and serving
costs the daemon little CPU (it sleeps, never spins)."""
import os

import pytest

import slow_tier

pytestmark = pytest.mark.timeout(300)

TOLERANCE = 0.20        # probed figure within 20 % of the configured one (the machine is shared)
AGREEMENT = 0.10        # repeated probes within 10 % of each other
MiB = 2**20


@pytest.fixture(autouse=True)
def _needs_tier():
    why = slow_tier.unavailable()
    if why:
        pytest.skip(why)


def _probes(mnt, n=3):
    from tfdarshan.advice import tiers
    out = []
    for _ in range(n):
        out.append(tiers.probe(mnt, size=16 << 20, opens=30, small_reads=16, repeats=5))
    return out


def _agree(values):
    return (max(values) - min(values)) / sorted(values)[len(values) // 2] <= AGREEMENT


def test_latencies_are_what_was_configured(tmp_path):
    from case_studies.slowfs import mounted
    (tmp_path / "root").mkdir()
    meta, read = 0.005, 0.010
    with mounted(str(tmp_path / "root"), str(tmp_path / "mnt"), meta_latency=meta, read_latency=read,
                 bandwidth="0") as mnt:
        probes = _probes(mnt)
    for p in probes:
        # the probe opens <mount>/<probe dir>/<file>: a lookup of each of the
        # two components (attribute and entry timeouts are 0) and the open
        assert 3 * meta <= p.open_latency <= 3 * meta * (1 + TOLERANCE), p
        # the probe takes 4 KiB at its measured bandwidth off a read's time; on a
        # tier whose bandwidth comes from this latency that is ~3 % of it
        assert abs(p.read_latency / read - 1) <= TOLERANCE, p
    assert _agree([p.open_latency for p in probes]) and _agree([p.read_latency for p in probes]), probes


def test_bandwidth_is_what_was_configured_and_the_daemon_sleeps(tmp_path):
    import time
    from case_studies.slowfs import cpu_seconds, mounted
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "big.bin").write_bytes(os.urandom(32 * MiB))
    with mounted(str(tmp_path / "root"), str(tmp_path / "mnt"), meta_latency=0, read_latency=0,
                 bandwidth="40M") as mnt:
        probes = _probes(mnt)
        # the daemon's CPU over reads alone (the probe's open-rate phase makes it
        # answer thousands of opens a second, which is work, not waiting)
        c, t = cpu_seconds(mnt.pid), time.monotonic()
        with open(os.path.join(mnt, "big.bin"), "rb", buffering=0) as f:
            while f.read(1 << 20):
                pass
        elapsed, cpu = time.monotonic() - t, cpu_seconds(mnt.pid) - c
    for p in probes:
        assert abs(p.bandwidth / (40 * MiB) - 1) <= TOLERANCE, p
    assert _agree([p.bandwidth for p in probes]), probes
    # 32 MiB at 40 MiB/s take at least 0.8 s; a daemon that spun while it
    # waits would use about that much CPU, one that sleeps a small share
    assert elapsed >= 0.8 * (1 - 0.02) and cpu < 0.3 * elapsed, (elapsed, cpu)


def test_writes_and_fsync_pay_their_latency(tmp_path):
    import time
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
    assert 0.2 * (1 - 0.02) <= wrote <= 0.2 * (1 + TOLERANCE) + 0.05, wrote       # 4 MiB at 20 MiB/s
    assert 0.2 * (1 - 0.02) <= synced <= 0.2 * (1 + TOLERANCE) + 0.05, synced
