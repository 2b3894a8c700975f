"""Exact totals under many threads, and attach/detach while they run."""
import ctypes
import os
import threading

import tfdarshan
from tfdarshan.capture import _native
from counters import row

THREADS = 16
CALLS = 100_000


def _open_files(tmp_path, shared: int, private: int):
    shared_path = tmp_path / "shared.bin"
    shared_path.write_bytes(os.urandom(8192))
    fds, paths = [], []
    for i in range(shared):
        fds.append(os.open(shared_path, os.O_RDONLY))   # one descriptor per thread, same file
        paths.append(shared_path)
    for i in range(private):
        p = tmp_path / f"private-{i}.bin"
        p.write_bytes(os.urandom(8192))
        fds.append(os.open(p, os.O_RDONLY))
        paths.append(p)
    return fds, paths


def _run(lib, fds, n, gen=None):
    arr = (ctypes.c_int * len(fds))(*fds)
    out = (ctypes.c_long * 2)()
    assert lib.run_preads(arr, len(fds), n, gen, out) == 0
    return out[0], out[1]


def test_sixteen_threads_exact_totals(tmp_path, iostress, attached):
    fds, paths = _open_files(tmp_path, shared=THREADS // 2, private=THREADS // 2)
    try:
        with tfdarshan.profile() as prof:
            done, _ = _run(iostress, fds, CALLS)
        assert done == THREADS * CALLS
        posix = prof.snapshot.posix
        shared = row(posix, paths[0])
        assert shared["POSIX_READS"] == (THREADS // 2) * CALLS
        assert shared["POSIX_BYTES_READ"] == (THREADS // 2) * CALLS * 4096
        assert shared["POSIX_SIZE_READ_1K_10K"] == (THREADS // 2) * CALLS
        assert shared["POSIX_ACCESS1_ACCESS"] == 4096
        assert shared["POSIX_ACCESS1_COUNT"] == (THREADS // 2) * CALLS
        for p in paths[THREADS // 2:]:
            r = row(posix, p)
            assert r["POSIX_READS"] == CALLS and r["POSIX_BYTES_READ"] == CALLS * 4096
    finally:
        for fd in fds:
            os.close(fd)


def test_attach_detach_loop_while_threads_read(tmp_path, iostress):
    fds, paths = _open_files(tmp_path, shared=4, private=4)
    gen = _native.attach_generation_address()
    result = {}
    try:
        tfdarshan.attach()
        before = tfdarshan.snapshot()
        done = surely = flips = batches = 0
        # keep the threads reading until the loop has flipped many times
        while flips < 30 and batches < 50:
            worker = threading.Thread(target=lambda: result.update(r=_run(iostress, fds, 100_000, gen)))
            worker.start()
            while worker.is_alive():
                tfdarshan.detach()
                tfdarshan.attach()
                flips += 1
            worker.join()
            done += result["r"][0]
            surely += result["r"][1]
            batches += 1
        counted = int((tfdarshan.snapshot() - before).posix["POSIX_READS"].sum())
        assert done == batches * 8 * 100_000
        assert flips >= 30, "the loop should have flipped many times while the threads ran"
        # every call made entirely while attached was counted, none invented
        assert surely <= counted <= done, (surely, counted, done)
        assert surely > 0
        # and once attached for good, counting is exact again
        with tfdarshan.profile() as prof:
            done2, _ = _run(iostress, fds, 1000)
        assert int(prof.snapshot.posix["POSIX_READS"].sum()) == done2 == 8000
    finally:
        tfdarshan.detach()
        for fd in fds:
            os.close(fd)


def test_python_threads_os_pread(tmp_path, attached):
    p = tmp_path / "py.bin"
    p.write_bytes(os.urandom(4096))
    fd = os.open(p, os.O_RDONLY)
    n, threads = 5000, 8
    try:
        with tfdarshan.profile() as prof:
            ts = [threading.Thread(target=lambda: [os.pread(fd, 512, 0) for _ in range(n)]) for _ in range(threads)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        r = row(prof.snapshot.posix, p)
        assert r["POSIX_READS"] == n * threads
        assert r["POSIX_BYTES_READ"] == n * threads * 512
    finally:
        os.close(fd)
