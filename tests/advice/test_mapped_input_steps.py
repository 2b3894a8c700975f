"""Input read through memory maps inside training steps is training input,
and what it cost is measured or said to be unknown, never made up from
other files' reads. A script under `tfdarshan run` reads a small file with
read() every step; in step 1 it sums a 16 MiB np.memmap whose pages it has
just dropped from the page cache (cold), in step 2 a 64 MiB np.memmap just
written (warm), in step 3 an np.load(mmap_mode='r') array. The step series
counts what each step read from storage (major page faults, block-device
read bytes); a file whose steps read nothing there, on a local disk, came
from memory, so staging it saves nothing of its mapped part. Expected sizes
come from os.stat, the counts from the script's own getrusage and
/proc/self/io around each step body (a part of the step the series counts)."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tfdarshan.logs.logdir import find_sessions, load_snapshot, load_steps

MIB = 1 << 20
SCRIPT = """
import json, os, resource, sys
import numpy as np
import tfdarshan
small, cold, warm, npy, record = sys.argv[1:6]
def storage():
    io = dict(line.split(":") for line in open("/proc/self/io").read().splitlines())
    return resource.getrusage(resource.RUSAGE_SELF).ru_majflt, int(io["read_bytes"])
seen = {}
for step in range(4):
    with tfdarshan.step(step):
        before = storage()
        with open(small, "rb") as f:
            f.read()
        if step == 1:
            m = np.memmap(cold, dtype=np.uint8, mode="r")
            int(m.sum(dtype=np.uint64))
            del m
        if step == 2:
            m = np.memmap(warm, dtype=np.uint8, mode="r")
            int(m.sum(dtype=np.uint64))
            del m
        if step == 3:
            a = np.load(npy, mmap_mode="r")
            float(a.sum())
            del a
        seen[step] = [b - a for a, b in zip(before, storage())]
json.dump(seen, open(record, "w"))
"""


def cold_file(path, size):
    with open(path, "wb") as f:
        f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("mapped-steps")
    data = root / "data"
    data.mkdir()
    small, cold, warm, npy = data / "small.bin", data / "cold.bin", data / "warm.bin", data / "array.npy"
    small.write_bytes(os.urandom(64 << 10))
    warm.write_bytes(os.urandom(64 * MIB))
    np.save(npy, np.random.default_rng(0).random(1 << 20))        # 8 MiB of float64 after its header
    cold_file(cold, 16 * MIB)
    (root / "train.py").write_text(SCRIPT)
    logdir = root / "logs"
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(root / "train.py"),
                        str(small), str(cold), str(warm), str(npy), str(root / "seen.json")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    (session,) = find_sessions(logdir)
    seen = {int(k): v for k, v in json.loads((root / "seen.json").read_text()).items()}
    fstype = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", str(data)], capture_output=True,
                            text=True).stdout.strip()
    return {"root": root, "logdir": logdir, "session": session, "seen": seen, "fstype": fstype,
            "paths": {"small": str(small), "cold": str(cold), "warm": str(warm), "npy": str(npy)}}


def _advice(run, tiers=()):
    from tfdarshan.advice import advisor, tiers as T
    session = run["session"]
    snap = load_snapshot(session)
    steps, step_files = load_steps(session)
    fast = T.Tier(path=str(run["root"] / "fast"), bandwidth=10e9, read_latency=1e-6, open_latency=1e-6)
    return advisor.recommend(snap, fast, 1 << 30, steps=steps, step_files=step_files, tiers=tiers), steps


def test_the_series_counts_what_each_step_read_from_storage(run):
    steps, _ = load_steps(run["session"])
    st = steps.set_index("step")
    # each step's counts cover its body, where the script counted its own
    for step, (faults, read) in run["seen"].items():
        assert int(st.at[step, "major_faults"]) >= faults, (step, faults, st["major_faults"].to_dict())
        assert int(st.at[step, "storage_read_bytes"]) >= read, (step, read, st["storage_read_bytes"].to_dict())


def test_memory_mapped_reads_in_steps_are_training_input(run):
    adv, _ = _advice(run)
    c = adv.costs.set_index("path")
    for name, size in (("cold", 16 * MIB), ("warm", 64 * MIB)):
        path = run["paths"][name]
        assert os.stat(path).st_size == size
        assert bool(c.at[path, "training_input"]), name
        assert abs(int(c.at[path, "mmap_bytes"]) - size) <= 0.05 * size, (name, c.at[path, "mmap_bytes"])
    assert bool(c.at[run["paths"]["npy"], "training_input"])
    left = {x for group in adv.left_out for x in group["examples"]}
    assert not left & set(run["paths"].values()), adv.left_out
    (f,) = [f for f in adv.findings if f.title == "Input read through memory maps"]
    assert f.evidence["files"] == 3 and all(os.path.basename(p) in f.detail
                                           for p in (run["paths"]["warm"], run["paths"]["cold"], run["paths"]["npy"]))


def test_what_a_mapped_read_cost_is_measured_or_unknown(run):
    from tfdarshan.advice import cost_model
    adv, steps = _advice(run)
    st = steps.set_index("step")
    from_storage = st["major_faults"] + st["storage_read_bytes"]
    counted = run["fstype"] in ("ext4", "xfs", "btrfs", "tmpfs")     # the block layer (or memory) sees its reads
    c = adv.costs.set_index("path")
    for name, step in (("cold", 1), ("warm", 2), ("npy", 3)):
        row = c.loc[run["paths"][name]]
        calls = (row["opens"] + row["stats"]) * row["meta_unit"] + row["reads"] * row["read_unit"]
        if int(from_storage.loc[step]) == 0 and counted:
            # nothing read from storage in its step: its pages came from memory, which costs no storage time
            assert row["mmap_priced"] == cost_model.IN_MEMORY, name
        else:
            # read from storage (or it cannot be told), and no tier's probe prices it: unknown, nothing claimed
            assert row["mmap_priced"] == "", name
        # either way the mapped part adds nothing to what its calls are expected to cost
        assert row["expected_time"] == pytest.approx(calls, rel=1e-9, abs=1e-12), name
        assert row["saving"] <= row["expected_time"] + 1e-12
    # the cold file's pages were read from storage in step 1 (the script saw it there, unless the kernel
    # kept them cached): what the series counted says so, and nothing is claimed without a probe
    if sum(run["seen"][1]) > 0:
        assert c.at[run["paths"]["cold"], "mmap_priced"] == "" and c.at[run["paths"]["cold"], "saving"] == 0.0
    (f,) = [f for f in adv.findings if f.title == "Input read through memory maps"]
    assert f.evidence["in_memory"] == (sum(int(from_storage.loc[s]) == 0 for s in (1, 2, 3)) if counted else 0)


def test_a_probed_tier_prices_faults_from_storage_as_an_estimate(run):
    from tfdarshan.advice import cost_model, tiers as T
    steps, _ = load_steps(run["session"])
    st = steps.set_index("step")
    if int(st.at[1, "major_faults"] + st.at[1, "storage_read_bytes"]) == 0:
        pytest.skip("the cold file was read from memory (the kernel kept its pages): nothing to price")
    slow = T.Tier(path=str(run["root"] / "data"), bandwidth=100e6, read_latency=1e-3, open_latency=1e-3)
    adv, _ = _advice(run, tiers=[slow])
    row = adv.costs.set_index("path").loc[run["paths"]["cold"]]
    size = int(row["mmap_bytes"])
    requests = -(-size // cost_model.MAPPED_REQUEST)
    assert row["mmap_priced"] == cost_model.PROBED
    assert row["saving"] >= slow.time(0, 0, requests, size) - adv.fast_tier.time(0, 0, requests, size) - 1e-9


def test_recommend_reports_it_without_a_made_up_saving(run):
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(run["logdir"]), "--fast-tier",
                        str(run["root"] / "fast"), "--capacity", "1GiB", "--format", "json", "--no-store",
                        "--tiers", str(_fast_toml(run))], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    advice = json.loads(p.stdout)
    chosen = {f["path"]: f for f in advice["files"]}
    for name in ("warm", "npy"):
        f = chosen.get(run["paths"][name])
        # staged only for a saving its calls account for: never more than they are expected to cost
        if f is not None:
            assert f["saving"] <= f["current_time"] * 10 + 1e-3, f
    (finding,) = [f for f in advice["findings"] if f["title"] == "Input read through memory maps"]
    assert finding["evidence"]["files"] == 3


def _fast_toml(run):
    path = run["root"] / "fast.toml"
    (run["root"] / "fast").mkdir(exist_ok=True)
    path.write_text(f'[[tier]]\npath = "{run["root"] / "fast"}"\nbandwidth = 10e9\nread_latency = 1e-6\n'
                    f'open_latency = 1e-6\ncapacity = {1 << 30}\n')
    return path
