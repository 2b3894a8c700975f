"""64 threads of mixed I/O while the test attaches, snapshots and detaches
in a loop (WINDOWS times): no crash, no deadlock, and every window exact.

The threads (tests/native/iostress.c) count what they did; at a barrier
they are all parked between operations, so the window from the attach to
the barrier must hold exactly their counts. Snapshots are also taken while
they run (to race the collector against writers) and detach happens while
they run (to race unpatching against calls in flight)."""
import ctypes
import os
import time

import numpy as np
import pytest

import tfdarshan

pytestmark = pytest.mark.cost(60)

THREADS = 64
WINDOWS = int(os.environ.get("TFDARSHAN_STRESS_WINDOWS", "3"))
COUNTERS = ["POSIX_OPENS", "POSIX_READS", "POSIX_WRITES", "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN",
            "POSIX_STATS", "POSIX_DUPS"]       # the order of iostress.c's C_* enum


def _bind(lib):
    lib.stress_start.argtypes = [ctypes.c_int, ctypes.c_char_p]
    lib.stress_take_counts.argtypes = [ctypes.c_void_p]
    return lib


def _taken(lib) -> np.ndarray:
    """[thread, file (own, shared), counter] since the last call."""
    out = np.zeros((THREADS, 2, len(COUNTERS)), dtype=np.int64)
    lib.stress_take_counts(out.ctypes.data)
    return out


def _running_total(snap, paths) -> int:
    p = snap.posix
    return int(p.loc[p["path"].isin(paths), ["POSIX_READS", "POSIX_WRITES", "POSIX_OPENS"]].to_numpy().sum())


def test_mixed_io_under_attach_snapshot_detach_loop(tmp_path, iostress):
    lib = _bind(iostress)
    own = [str(tmp_path / f"own-{i:03d}") for i in range(THREADS)]
    shared = str(tmp_path / "shared")
    for p in own + [shared]:
        with open(p, "wb") as f:
            f.write(os.urandom(65536))
    assert not tfdarshan.is_attached()
    assert lib.stress_start(THREADS, str(tmp_path).encode()) == 0
    live_snapshots = 0
    try:
        for n in range(WINDOWS):
            # threads parked: attach, and the window starts here
            tfdarshan.attach()
            _taken(lib)
            start = tfdarshan.snapshot()
            lib.stress_resume()
            seen = 0
            for _ in range(2):            # collects racing the writers
                time.sleep(0.05)
                total = _running_total(tfdarshan.snapshot() - start, own + [shared])
                assert total >= seen, "a live snapshot went backwards"
                seen = total
                live_snapshots += 1
            lib.stress_pause()
            window = tfdarshan.snapshot() - start
            counted = _taken(lib)
            posix = window.posix.set_index("path")
            for i, p in enumerate(own):
                got = posix.loc[p, COUNTERS].to_numpy(dtype=np.int64) if p in posix.index else 0
                np.testing.assert_array_equal(got, counted[i, 0], err_msg=f"window {n}, {p}")
            np.testing.assert_array_equal(posix.loc[shared, COUNTERS].to_numpy(dtype=np.int64),
                                          counted[:, 1].sum(axis=0), err_msg=f"window {n}, shared")
            assert counted.sum() > 0
            # detach while every thread is mid-flight
            lib.stress_resume()
            time.sleep(0.05)
            assert tfdarshan.detach()
            time.sleep(0.02)
            lib.stress_pause()
    finally:
        lib.stress_pause()
        lib.stress_stop()
        tfdarshan.detach()
    assert live_snapshots == 2 * WINDOWS
    print(f"{WINDOWS} exact windows, {live_snapshots} live snapshots, {THREADS} threads")
