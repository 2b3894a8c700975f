"""Exact Darshan counters from a real TensorFlow pipeline.

Expected values come from the file sizes and TensorFlow 2.21's documented
request pattern (see ../shared/FACTS.md), run through an independent model
of Darshan's rules (darshan_model.py)."""
import os

import numpy as np
import pytest

import tfdarshan
from counters import assert_counters, row
from darshan_model import SIZE_NAMES, PosixFile

TFRECORD_CHUNK = 256 * 1024   # TFRecordDataset's default buffer

COMPARED = (["POSIX_OPENS", "POSIX_READS", "POSIX_BYTES_READ", "POSIX_SEQ_READS", "POSIX_CONSEC_READS",
             "POSIX_MAX_BYTE_READ", "POSIX_FILE_NOT_ALIGNED", "POSIX_WRITES", "POSIX_BYTES_WRITTEN",
             "POSIX_RW_SWITCHES"]
            + [f"POSIX_SIZE_READ_{n}" for n in SIZE_NAMES]
            + [f"POSIX_{w}{i}_{s}" for w in ("ACCESS", "STRIDE") for i in range(1, 5) for s in (w, "COUNT")])


def tf_pread_pattern(size: int, chunk: int, bsize: int, written_by_us: bool = False) -> PosixFile:
    """open, then preads of `chunk` bytes from offset 0 until one returns 0.

    Darshan remembers a file's last I/O type across opens: a file this
    process wrote earlier starts the window with a read/write switch."""
    m = PosixFile(file_alignment=bsize)
    if written_by_us:
        m.last_io = "WRITE"
    m.open()
    off = 0
    while True:
        got = min(chunk, size - off)
        m.read(got, offset=off)
        if got == 0:
            break
        off += got
    m.close()
    return m


@pytest.fixture
def tfrecords(tf, tmp_path):
    rng = np.random.default_rng(7)
    paths = []
    # below one chunk, exactly two chunks, and several chunks with a tail
    for i, target in enumerate([20_000, 2 * TFRECORD_CHUNK, 1_300_000]):
        p = tmp_path / f"train-{i:02d}.tfrecord"
        with tf.io.TFRecordWriter(str(p)) as w:
            written = 0
            while written < target - 16:
                n = int(min(rng.integers(500, 9000), target - written - 16))
                w.write(rng.bytes(n))
                written += n + 16      # TFRecord framing: 8 length + 4 + 4 CRC
        paths.append(p)
    return paths


def test_tfrecord_dataset_counts_match_darshan_model(tf, tfrecords, attached):
    with tfdarshan.profile() as prof:
        n = sum(1 for _ in tf.data.TFRecordDataset([str(p) for p in tfrecords]))
    assert n > 0
    snap = prof.snapshot
    for p in tfrecords:
        model = tf_pread_pattern(os.path.getsize(p), TFRECORD_CHUNK, os.statvfs(p).f_bsize)
        assert_counters(row(snap.posix, p), model.counters(), COMPARED)
    # TensorFlow's read-to-EOF leaves one zero-length read per file
    extra = snap.extra.set_index("record_id")
    for p in tfrecords:
        rid = row(snap.posix, p)["record_id"]
        assert extra.loc[rid, "ZERO_READS"] == 1


def test_read_file_over_many_small_files(tf, tmp_path, attached):
    rng = np.random.default_rng(11)
    paths = []
    for i in range(40):
        p = tmp_path / f"img{i:03d}.jpg"
        p.write_bytes(rng.bytes(int(rng.integers(50, 400_000))))
        paths.append(p)
    with tfdarshan.profile() as prof:
        ds = tf.data.Dataset.from_tensor_slices([str(p) for p in paths]).map(
            tf.io.read_file, num_parallel_calls=4)
        total = sum(len(x.numpy()) for x in ds)
    assert total == sum(os.path.getsize(p) for p in paths)
    snap = prof.snapshot
    for p in paths:
        size = os.path.getsize(p)
        # ReadFile asks for the whole file at once, then reads once more at EOF
        model = tf_pread_pattern(size, size, os.statvfs(p).f_bsize, written_by_us=True)
        assert_counters(row(snap.posix, p), model.counters(), COMPARED)
    assert snap.posix["POSIX_BYTES_READ"].sum() >= total


def test_tfrecord_writer_bytes_are_exact(tf, tmp_path, attached):
    p = tmp_path / "out.tfrecord"
    payloads = [b"x" * n for n in (10, 1000, 70_000, 3)]
    with tfdarshan.profile() as prof:
        with tf.io.TFRecordWriter(str(p)) as w:
            for b in payloads:
                w.write(b)
    expected = sum(len(b) + 16 for b in payloads)
    assert os.path.getsize(p) == expected
    r = row(prof.snapshot.stdio, p)
    assert r["STDIO_BYTES_WRITTEN"] == expected
    assert r["STDIO_OPENS"] == 1
    # three fwrite calls per record: header, payload, footer
    assert r["STDIO_WRITES"] == 3 * len(payloads)


def test_python_open_read_and_os_pread(tmp_path, attached):
    p = tmp_path / "plain.bin"
    data = os.urandom(300_000)
    p.write_bytes(data)
    with tfdarshan.profile() as prof:
        with open(p, "rb", buffering=0) as f:
            assert f.read() == data
        fd = os.open(p, os.O_RDONLY)
        try:
            assert os.pread(fd, 4096, 8192) == data[8192:12288]
            assert os.pread(fd, 100, 299_950) == data[299_950:]
        finally:
            os.close(fd)
    r = row(prof.snapshot.posix, p)
    assert r["POSIX_OPENS"] == 2
    # FileIO.readall: one read of the size fstat reports (+1), then one at EOF
    assert r["POSIX_BYTES_READ"] == len(data) + 4096 + 50
    assert r["POSIX_READS"] >= 4
    assert r["POSIX_STATS"] >= 1       # FileIO fstat()s the file it opens
    assert r["POSIX_MAX_BYTE_READ"] == len(data) - 1
