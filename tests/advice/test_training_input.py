"""Staging moves training input only, and says what it left out; the
advice invents no figures; `--compare` answers what the user waits for.

- A run under `tfdarshan run` reads, inside its steps, its data, Keras'
  keras.json, matplotlib's font cache and tfdarshan's own staging map, and
  a vocabulary and its first data file (prefetched) only before its first
  step. Once all of them were staged, and
  `--compare` then warned that three staged files were read from their
  sources. Now only the data is staged; the rest is listed with why.
- `--compare` takes session directories, and gives the change in step,
  training and window time (computed here from the series) beside the I/O
  time saved.
- End-of-file reads without a trace have an unknown cost (once: the mean
  read), a group's saving never exceeds the time it is out of, and "read
  k times" counts files."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pandas as pd
import pytest

import tfdarshan
from tfdarshan.advice import advisor, render, tiers as T
from tfdarshan.advice import training_input as TI
from tfdarshan.capture import counters as C
from tfdarshan.capture.snapshot import Snapshot, empty_dxt, empty_values
from tfdarshan.logs.logdir import find_sessions

FAST = T.Tier(path="/fast", fstype="tmpfs", open_latency=2e-6, stat_latency=1e-6, read_latency=1e-6,
              bandwidth=4e9, capacity=1 << 30)
SCRIPT = """
import os, sys, tfdarshan
data, vocab = sys.argv[1], sys.argv[2]
open(vocab, "rb").read()                                  # set-up: before the first step
paths = sorted(os.path.join(data, f) for f in os.listdir(data))
if os.environ.get("USE_STAGED"):
    paths = tfdarshan.staged_paths(paths)
open(paths[0], "rb").read()                               # prefetched before the first step: still data
home = os.path.expanduser("~")
extra = [os.path.join(home, ".keras", "keras.json"), os.path.join(home, ".cache", "matplotlib", "fontlist.json"),
         os.path.join(os.environ["XDG_DATA_HOME"], "tfdarshan", "staged.json")]
for step in range(4):
    with tfdarshan.step(step):
        for p in paths[1:] + extra:
            if os.path.exists(p):
                open(p, "rb").read()
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A home with Keras' and matplotlib's files, data, a vocabulary, a fast tier."""
    root = tmp_path_factory.mktemp("input")
    home, xdg = root / "home", root / "xdg"
    for p, size in ((home / ".keras" / "keras.json", 120), (home / ".cache" / "matplotlib" / "fontlist.json", 9000),
                    (xdg / "tfdarshan" / "staged.json", 2)):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(b"{}" if size == 2 else os.urandom(size))
    data = root / "data"
    data.mkdir()
    for i in range(6):
        (data / f"part-{i}.bin").write_bytes(os.urandom(60_000 + 1000 * i))
    (root / "vocab.txt").write_bytes(os.urandom(5000))
    (root / "train.py").write_text(SCRIPT)
    fast = pathlib_mkdtemp()
    toml = root / "tiers.toml"
    # declared far faster than any real tier: every file read is worth staging, so the plan shows the rules
    toml.write_text(f'[[tier]]\npath = "{fast}"\nname = "fast"\nbandwidth = "10000G"\nread_latency = 1e-9\n'
                    'open_latency = 1e-9\nstat_latency = 1e-9\ncapacity = "1G"\n')
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(xdg), "TFDARSHAN_TIERS": str(root / "t.json")}
    yield {"root": root, "home": home, "xdg": xdg, "data": data, "fast": fast, "toml": toml, "env": env}
    shutil.rmtree(fast, ignore_errors=True)


def pathlib_mkdtemp():
    return tempfile.mkdtemp(prefix="tfd-input-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)


def tfd(world, *args, **env):
    return subprocess.run([sys.executable, "-m", "tfdarshan", *args], capture_output=True, text=True, timeout=300,
                          env={**world["env"], **env})


def run(world, name, **env):
    logdir = world["root"] / name
    r = tfd(world, "run", "--logdir", str(logdir), str(world["root"] / "train.py"), str(world["data"]),
            str(world["root"] / "vocab.txt"), **env)
    assert r.returncode == 0, r.stderr[-2000:]
    [s] = find_sessions(logdir)
    return logdir, s


@pytest.fixture(scope="module")
def before(world):
    return run(world, "before")


def test_only_training_input_is_staged_and_the_rest_is_said(world, before):
    logdir, _ = before
    r = tfd(world, "recommend", str(logdir), "--fast-tier", world["fast"], "--tiers", str(world["toml"]),
            "--capacity", "1G", "--format", "json", "--no-store")
    assert r.returncode == 0, r.stderr
    a = json.loads(r.stdout)
    data = {str(p) for p in world["data"].iterdir()}
    assert {f["path"] for f in a["files"]} == data      # part-0, read before the first step, is of the dataset
    why = {x["reason"]: x for x in a["left_out"]}
    assert why[TI.CONFIG]["files"] == 2 and why[TI.CONFIG]["bytes"] == 120 + 9000
    assert why[TI.OWN]["files"] == 1 and why[TI.OUTSIDE]["files"] == 1
    assert why[TI.OUTSIDE]["examples"] == [str(world["root"] / "vocab.txt")]
    text = tfd(world, "recommend", str(logdir), "--fast-tier", world["fast"], "--tiers", str(world["toml"]),
               "--capacity", "1G", "--no-store").stdout
    assert "Left out (not training input):" in text and "keras.json" in text


def test_compare_gives_wall_times_and_takes_session_directories(world, before):
    logdir, s_before = before
    manifest = world["root"] / "manifest.json"
    r = tfd(world, "recommend", str(logdir), "--fast-tier", world["fast"], "--tiers", str(world["toml"]),
            "--capacity", "1G", "--manifest", str(manifest))
    assert r.returncode == 0, r.stderr
    assert tfd(world, "stage", str(manifest), "--quiet").returncode == 0
    _, s_after = run(world, "after", USE_STAGED="1")
    r = tfd(world, "recommend", "--compare", str(s_before.directory), str(s_after.directory), "--format", "json")
    assert r.returncode == 0, r.stderr          # nothing staged was read from its source
    out = json.loads(r.stdout)
    assert out["staged_files"] == 6 and out["copies_read"] == 6 and out["sources_read"] == 0
    for key, s in (("before", s_before), ("after", s_after)):
        steps = pd.read_parquet(s.directory / f"{s.hosts[0]}.steps.parquet")
        real = steps[(steps["step"] >= 0) & ~steps["cut_by_window_end"]]
        length = (real["end"] - real["start"]).to_numpy()
        snap = tfdarshan.read_darshan_log(s.directory / f"{s.hosts[0]}.darshan")
        w = out["wall"]
        assert w["steps"][key] == 4
        assert w["step_time"][key] == pytest.approx(float(np.median(length)), rel=1e-9)
        assert w["training_time"][key] == pytest.approx(float(length.sum()), rel=1e-9)
        assert w["window_time"][key] == pytest.approx(snap.end - snap.start, rel=1e-9)
    t = out["wall"]["training_time"]
    assert t["change"] == pytest.approx((t["after"] - t["before"]) / t["before"], rel=1e-9)
    # the job time (one process: its training steps) and the plan's prediction of its saving, with their ratio
    j, predicted = out["job"], json.loads(manifest.read_text())["advice"]["predicted_job_saving"]
    assert j["before"] == pytest.approx(t["before"], rel=1e-9) and j["after"] == pytest.approx(t["after"], rel=1e-9)
    assert predicted is not None and j["predicted"] == pytest.approx(predicted, rel=1e-12)
    assert j["ratio"] == pytest.approx((j["before"] - j["after"]) / predicted, rel=1e-9)
    text = tfd(world, "recommend", "--compare", str(s_before.directory), str(s_after.directory)).stdout
    assert text.splitlines()[0].startswith("job time") and "achieved/predicted" in text.splitlines()[0]
    assert "summed over threads and ranks" in text


# ------------------------------------------------------------- no invented figures
def snapshot_of(rows, zero=None):
    df = C.empty_frame("POSIX")
    recs = [{**{c: 0 for c in df.columns}, **r} for r in rows]
    df = pd.DataFrame(recs, columns=df.columns).astype(C.empty_frame("POSIX").dtypes.to_dict())
    df["record_id"] = np.arange(1, len(df) + 1, dtype=np.uint64)
    extra = pd.DataFrame({"record_id": df["record_id"], "module": "POSIX",
                          "ZERO_READS": np.asarray(zero if zero is not None else np.zeros(len(df)), np.int64)})
    return Snapshot(df, C.empty_frame("STDIO"), empty_values(), extra, empty_dxt(), {"start": 0.0, "end": 10.0})


def test_end_of_file_reads_without_a_trace_cost_unknown():
    snap = snapshot_of([{"path": f"/nowhere/f{i}", "POSIX_OPENS": 1, "POSIX_READS": 2, "POSIX_BYTES_READ": 1000,
                         "POSIX_MAX_BYTE_READ": 999, "POSIX_SIZE_READ_0_100": 1, "POSIX_SIZE_READ_100_1K": 1,
                         "POSIX_F_READ_TIME": 0.4} for i in range(10)], zero=[1] * 10)
    (f,) = [f for f in advisor.diagnose(snap, advisor.file_costs(snap, FAST)) if "zero-length" in f.title]
    assert f.evidence["seconds_each"] is None and f.evidence["share_of_read_time"] is None
    assert "unknown" in f.detail and "%" not in f.detail and f.level == "INFO"


def test_a_groups_saving_never_exceeds_its_time(tmp_path):
    # two files alike (one mount, one request size): one paid 1 ms, the other 9 ms
    paths = []
    for name in ("a-0.bin", "b-0.bin"):
        paths.append(tmp_path / name)
        paths[-1].write_bytes(b"x" * 100_000)
    snap = snapshot_of([{"path": str(p), "POSIX_OPENS": 1, "POSIX_READS": 1, "POSIX_BYTES_READ": 100_000,
                         "POSIX_MAX_BYTE_READ": 99_999, "POSIX_F_READ_TIME": t} for p, t in zip(paths, (1e-3, 9e-3))])
    a = advisor.recommend(snap, FAST, 1 << 30)
    sel = a.selection()
    assert len(sel) == 2 and (sel["saving"] <= sel["expected_time"] + 1e-15).all()
    assert (sel["saving"] > sel["current_time"]).any()         # measured less than the model saves: the trap
    for line in render.render_text(a).splitlines():
        m = re.search(r"saves ([\d.]+) (ms|µs|s) of ([\d.]+) (ms|µs|s)", line)
        if m:
            unit = {"s": 1.0, "ms": 1e-3, "µs": 1e-6}
            assert float(m.group(1)) * unit[m.group(2)] <= float(m.group(3)) * unit[m.group(4)] * 1.0005, line


def test_read_k_times_counts_files(tmp_path):
    paths = []
    for i in range(4):
        paths.append(tmp_path / f"f{i}.bin")
        paths[-1].write_bytes(b"x" * 10_000)
    times = [2, 2, 2, 3]
    snap = snapshot_of([{"path": str(p), "POSIX_OPENS": k, "POSIX_READS": 2 * k, "POSIX_BYTES_READ": 10_000 * k,
                         "POSIX_MAX_BYTE_READ": 9_999, "POSIX_F_READ_TIME": 1e-3} for p, k in zip(paths, times)],
                       zero=times)
    (f,) = [f for f in advisor.diagnose(snap, advisor.file_costs(snap, FAST)) if "read again" in f.title]
    assert "of 4 files, 3 were read 2 times in full; 1 was read 3 times in full" in f.detail, f.detail


def test_user_directories_named_by_the_environment_are_configuration(tmp_path, monkeypatch):
    # given each configuration directory the environment names, and a data file beside them
    dirs = {name: tmp_path / name.lower() for name in TI.CONFIG_ENV}
    for name, d in dirs.items():
        monkeypatch.setenv(name, str(d))
    data = str(tmp_path / "data" / "shard-0.tfrecord")
    paths = [str(d / "some" / "file.bin") for d in dirs.values()] + [data, str(tmp_path / "xdg_cache_homeless.bin")]
    # when
    why = TI.reasons(paths)
    # then: the files inside those directories are configuration, the rest training input
    assert list(why) == [TI.CONFIG] * len(dirs) + ["", ""]


def test_shard_patterns_take_paths_that_are_not_utf8():
    """A name that is not UTF-8 (surrogate escapes, as os.fsdecode gives it)
    is told by its shard pattern like any other: the step series read shard
    2 of the same directory, so shard 1 belongs to that dataset; a file of
    another name does not."""
    from tfdarshan.advice.training_input import read_in_steps
    shard = "/data/bad\udcff-{:05d}.bin"
    step_files = pd.DataFrame({"step": [0], "path": pd.Series([shard.format(2)], dtype=object),
                               "reads": [1], "bytes_read": [10]})
    paths = [shard.format(1), "/data/other.bin", shard.format(2)]
    assert read_in_steps(paths, step_files).tolist() == [True, False, True]
