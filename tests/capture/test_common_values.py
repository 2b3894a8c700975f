"""Darshan's common access sizes and strides (up to 32 distinct values a
thread and file, darshan_track_common_val_counters) are counted exactly,
also once a file has more than the few a shard keeps inline and its
trackers move to memory of their own between two collects."""
import collections
import ctypes
import os

import pytest

pytestmark = pytest.mark.cost(2)

LIBC = ctypes.CDLL(None)
LIBC.malloc.restype = ctypes.c_void_p
LIBC.malloc.argtypes = [ctypes.c_size_t]
LIBC.free.argtypes = [ctypes.c_void_p]


def dirty_malloc_chunks(size: int = 2 * 32 * 8, n: int = 64) -> None:
    """Leave freed chunks of the collector's size full of ones, so memory it
    allocates and does not clear shows as nonsense counts."""
    chunks = [LIBC.malloc(size) for _ in range(n)]
    for c in chunks:
        ctypes.memset(c, 0xFF, size)
    for c in chunks:
        LIBC.free(c)


def access_counts(snap, path):
    rid = snap.posix.loc[snap.posix["path"] == str(path), "record_id"]
    assert len(rid) == 1
    v = snap.values
    v = v[(v["record_id"] == rid.iloc[0])]
    return ({int(a): int(b) for a, b in zip(v.loc[v["kind"] == 0, "value"], v.loc[v["kind"] == 0, "count"])},
            {int(a): int(b) for a, b in zip(v.loc[v["kind"] == 1, "value"], v.loc[v["kind"] == 1, "count"])})


@pytest.mark.parametrize("distinct", [3, 5, 12, 40])
def test_access_sizes_counted_exactly_across_collects(tmp_path, attached, distinct):
    path = tmp_path / "data.bin"
    path.write_bytes(os.urandom(1 << 20))    # one write of 1 MiB: the first access size
    sizes = [100 + 37 * i for i in range(distinct)] * 2
    expected = collections.Counter({1 << 20: 1})
    fd = os.open(path, os.O_RDONLY)
    try:
        off = 0
        for i, size in enumerate(sizes):
            if i == 2:                          # a collect before the trackers spill, one after
                attached.snapshot()
                dirty_malloc_chunks()
            got = os.pread(fd, size, off)
            assert len(got) == size
            expected[size] += 1
            off += size + (i % 3) * 8           # strides of 0, 8 and 16 bytes
        dirty_malloc_chunks()
        snap = attached.snapshot()
    finally:
        os.close(fd)
    access, stride = access_counts(snap, path)
    # the first 32 distinct sizes a thread reads or writes of a file are kept
    # (Darshan's runtime limit), with every one of their calls
    kept = dict(list(expected.items())[:32])
    assert access == kept
    # three strides at most, so every call's is kept
    assert set(stride) <= {0, 8, 16} and sum(stride.values()) == sum(expected.values())
