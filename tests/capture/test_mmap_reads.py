"""Reads through memory-mapped files, which Darshan cannot see (a page
fault is not a call), are estimated per file from the pages the process
mapped (/proc/self/pagemap), sampled at every collect and before a mapping
goes: a cold np.memmap sum within 5 % of the file, a partial read within
the kernel's fault-around of what was touched, and a Keras fit from a
memmapped array in the per-step series. Expected sizes come from the files
and the slices read, never from the shim."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

import tfdarshan
from counters import row
from tfdarshan.capture import _native

MIB = 1 << 20
FOLIO = 2 * MIB          # the most the kernel maps beyond a touched page (a PMD-sized folio; fault-around is 64 KiB)


def cold_file(path: pathlib.Path, size: int) -> pathlib.Path:
    """A file of `size` random bytes, written out and dropped from the page cache."""
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return path


def disk_reads() -> int:
    with open("/proc/self/io") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("read_bytes:"))


def on_tmpfs(path) -> bool:
    out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True).stdout
    return "tmpfs" in out


def test_cold_memmap_sum_is_counted_within_5_percent(attached, tmp_path):
    if on_tmpfs(tmp_path):
        pytest.skip("the test directory is on tmpfs: its pages cannot be evicted to make a cold read")
    size = 64 * MIB
    path = cold_file(tmp_path / "cold.bin", size)
    before = tfdarshan.snapshot()
    disk = disk_reads()
    m = np.memmap(path, dtype=np.uint8, mode="r")
    total = int(m.sum(dtype=np.uint64))
    read_from_disk = disk_reads() - disk
    window = tfdarshan.snapshot() - before
    del m
    assert total > 0
    # it was cold: the kernel read most of it from the device for this process
    assert read_from_disk >= size // 2, read_from_disk
    mapped = row(window.extra, path)["MMAP_BYTES"]
    assert abs(mapped - size) <= 0.05 * size, (mapped, size)
    # Darshan's own record of the file: one mmap, no bytes read
    p = row(window.posix, path)
    assert (p["POSIX_MMAPS"], p["POSIX_BYTES_READ"]) == (1, 0)


def test_a_partial_read_counts_what_was_touched_and_fault_around(attached, tmp_path):
    path = tmp_path / "part.bin"
    path.write_bytes(os.urandom(32 * MIB))
    touched = 12 * MIB + 5000
    before = tfdarshan.snapshot()
    m = np.memmap(path, dtype=np.uint8, mode="r")
    int(m[:touched].sum(dtype=np.uint64))
    del m                                  # sampled at munmap: no collect came in between
    mapped = row((tfdarshan.snapshot() - before).extra, path)["MMAP_BYTES"]
    assert touched <= mapped <= touched + FOLIO, (mapped, touched)


def test_a_mapping_is_sampled_before_it_goes_and_then_forgotten(attached, tmp_path):
    path = tmp_path / "short.bin"
    path.write_bytes(os.urandom(3 * MIB + 100))
    before = tfdarshan.snapshot()
    following = _native.followed_mappings()
    m = np.memmap(path, dtype=np.uint8, mode="r")
    assert _native.followed_mappings() == following + 1
    int(m.sum(dtype=np.uint64))
    m._mmap.close()                        # the munmap: its pages are counted then
    assert _native.followed_mappings() == following
    # the file's last page holds 100 bytes of it: counted as 100, not 4096
    assert row((tfdarshan.snapshot() - before).extra, path)["MMAP_BYTES"] == 3 * MIB + 100


def test_a_mapping_made_before_attach_is_followed_from_then_on(tmp_path):
    path = tmp_path / "early.bin"
    path.write_bytes(os.urandom(16 * MIB))
    was = tfdarshan.is_attached()
    if was:
        tfdarshan.detach()
    m = np.memmap(path, dtype=np.uint8, mode="r")
    try:
        int(m[:8 * MIB].sum(dtype=np.uint64))          # before attach: not ours to count
        tfdarshan.attach()
        before = tfdarshan.snapshot()
        int(m.sum(dtype=np.uint64))
        mapped = row((tfdarshan.snapshot() - before).extra, path)["MMAP_BYTES"]
    finally:
        del m
        tfdarshan.detach()
        if was:
            tfdarshan.attach()
    assert 8 * MIB - FOLIO <= mapped <= 8 * MIB, mapped


def test_keras_fit_from_a_memmapped_array_is_in_the_step_series(tf, tmp_path):
    """A token or feature file read through a memmap, a batch at a time (a
    PyDataset slicing it): each training step holds the bytes of its batch.
    Handed to fit() whole, the array is copied before the first batch: its
    bytes are the set-up's."""
    import keras
    import tfdarshan.keras
    from tfdarshan.logs.logdir import find_sessions, load_snapshot, load_steps
    from tfdarshan.steps.series import SETUP_STEP
    rows, width, batch = 8192, 256, 1024
    path = tmp_path / "features.f32"
    np.random.default_rng(0).standard_normal((rows, width), dtype=np.float32).tofile(path)
    y = np.zeros((rows, 1), dtype=np.float32)
    size = rows * width * 4

    class Batches(keras.utils.PyDataset):
        def __init__(self, x):
            super().__init__()
            self.x = x

        def __len__(self):
            return rows // batch

        def __getitem__(self, i):
            return np.array(self.x[i * batch:(i + 1) * batch]), y[i * batch:(i + 1) * batch]

    def fit(data, logdir, **kw):
        model = keras.Sequential([keras.Input((width,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        with tfdarshan.profile(logdir=str(logdir)) as p:
            model.fit(data, epochs=1, shuffle=False, verbose=0, callbacks=[tfdarshan.keras.IOProfileCallback()],
                      **kw)
        return p.step_files[p.step_files["record_id"] == _native.darshan_hash(str(path))]

    x = np.memmap(path, dtype=np.float32, mode="r", shape=(rows, width))     # mapped before the window opens
    files = fit(Batches(x), tmp_path / "logs")
    in_steps = files[files["step"] >= 0]
    assert abs(int(files["mmap_bytes"].sum()) - size) <= 0.05 * size, files
    # read a batch at a time: most of it inside the training steps, spread over them
    assert int(in_steps["mmap_bytes"].sum()) >= size / 2 and in_steps["step"].nunique() >= 2, files
    # the same on disk, where the tab and `recommend` read it
    (session,) = find_sessions(tmp_path / "logs")
    steps, step_files = load_steps(session)
    on_disk = step_files[step_files["path"] == str(path)]
    assert int(on_disk["mmap_bytes"].sum()) == int(files["mmap_bytes"].sum())
    assert int(steps["mmap_bytes"].sum()) >= int(on_disk["mmap_bytes"].sum())
    assert row(load_snapshot(session).extra, path)["MMAP_BYTES"] == int(files["mmap_bytes"].sum())
    del x
    # the whole array given to fit(): copied before the first batch, into the set-up
    x = np.memmap(path, dtype=np.float32, mode="r", shape=(rows, width))
    whole = fit(x, tmp_path / "logs-whole", y=y, batch_size=batch)
    assert abs(int(whole["mmap_bytes"].sum()) - size) <= 0.05 * size, whole
    assert set(whole.loc[whole["mmap_bytes"] > 0, "step"]) <= {SETUP_STEP, 0, 1}, whole
    del x


def test_a_forked_child_counts_its_own_reads_of_an_inherited_mapping(tmp_path):
    """The child follows the parent's mappings with its own fresh records:
    a shared file mapping's pages are not in its page tables until it
    touches them, so it counts what it read, and the parent what it did."""
    import json
    import sys
    path = tmp_path / "shared.bin"
    path.write_bytes(os.urandom(6 * MIB))
    script = f"""
import json, os, numpy as np, tfdarshan
tfdarshan.attach()
m = np.memmap({str(path)!r}, dtype=np.uint8, mode="r")
int(m[: {2 * MIB}].sum(dtype=np.uint64))               # the parent, before the fork
pid = os.fork()
if pid == 0:
    int(m.sum(dtype=np.uint64))                        # the child reads all of it
    e = tfdarshan.snapshot().extra
    open({str(tmp_path / "child.json")!r}, "w").write(json.dumps(int(e[e["path"] == {str(path)!r}]["MMAP_BYTES"].sum())))
    os._exit(0)
_, status = os.waitpid(pid, 0)
e = tfdarshan.snapshot().extra
print(json.dumps([status, int(e[e["path"] == {str(path)!r}]["MMAP_BYTES"].sum())]))
"""
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TFDARSHAN_NO_HOOKS": "1"})
    assert r.returncode == 0, r.stderr[-3000:]
    status, parent = json.loads(r.stdout.strip().splitlines()[-1])
    assert status == 0
    assert 2 * MIB <= parent <= 2 * MIB + FOLIO
    assert json.loads((tmp_path / "child.json").read_text()) == 6 * MIB


def test_memmapped_input_is_a_staging_candidate_with_its_bytes(attached, tmp_path):
    from tfdarshan.advice import advisor, cost_model, tiers as T
    size = 6 * MIB
    path = tmp_path / "tokens.bin"
    path.write_bytes(os.urandom(size))
    m = np.memmap(path, dtype=np.uint8, mode="r")
    before = tfdarshan.snapshot()
    int(m.sum(dtype=np.uint64))
    snap = tfdarshan.snapshot() - before
    del m
    fast = T.Tier(path=str(tmp_path / "fast"), bandwidth=10e9, read_latency=1e-6, open_latency=1e-6)
    slow = T.Tier(path=str(tmp_path), bandwidth=100e6, read_latency=1e-3, open_latency=1e-3)
    # priced by the file's tier: staged, and its saving is that tier's time less the fast one's
    adv = advisor.recommend(snap, fast, 1 << 30, tiers=[slow])
    c = adv.costs.set_index("path").loc[str(path)]
    requests = -(-size // (128 << 10))
    assert (c["mmap_bytes"], c["bytes_read"], c["size"], c["mmap_priced"]) == (size, size, size, cost_model.PROBED)
    assert c["saving"] == pytest.approx(slow.time(0, 0, requests, size) - fast.time(0, 0, requests, size))
    assert str(path) in {adv.costs["path"].iat[i] for i in adv.chosen}
    (f,) = [f for f in adv.findings if f.title == "Input read through memory maps"]
    assert f.evidence == {"files": 1, "mmap_bytes": size, "unpriced": 0, "in_memory": 0}
    # nothing to price it with: still a candidate with its bytes, no saving claimed, and said so
    adv = advisor.recommend(snap, fast, 1 << 30)
    c = adv.costs.set_index("path").loc[str(path)]
    assert (c["mmap_bytes"], c["saving"], c["mmap_priced"]) == (size, 0.0, "")
    (f,) = [f for f in adv.findings if f.title == "Input read through memory maps"]
    assert f.evidence["unpriced"] == 1 and "no saving is claimed" in f.detail
