"""A process killed with SIGKILL leaves its I/O up to its last collect: its
live log (capture/live.py) becomes a Darshan log marked partial when
`tfdarshan joblog` or `analyze` meets it. Each test waits for the process to
say that its collect is done (a file), then kills it: nothing depends on
timing."""
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest

import tfdarshan
from tfdarshan.analysis.analyze import read_table
from tfdarshan.capture import counters as C, live, live_reader
from tfdarshan.logs import joblog
from tfdarshan.logs.darshan_log import read_job_record

HOST = socket.gethostname()
SIZES = [1_000, 65_536, 300_001]
# reads its own files in a step (whose end collects), then asks for a
# snapshot (a collect in every mode); a rank told to wait then says so and sleeps
SCRIPT = """
import os, pathlib, sys, time, tfdarshan
me, ready, wait = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3] == "wait"
with tfdarshan.step(0):
    for name in sorted(os.listdir(me)):
        with open(os.path.join(me, name), "rb", buffering=0) as f:
            f.read(1000)
            f.read()
tfdarshan.snapshot()
if wait:
    ready.write_text("collected")
    time.sleep(600)
"""
# counters set by how long calls took: which read was slowest (its size)
# and which rank was fastest depend on latency, not on what was read
TIMES = {c for m in C.MODULES for c in C.names(m)[1]} | {
    "POSIX_FASTEST_RANK_BYTES", "POSIX_SLOWEST_RANK_BYTES", "POSIX_MAX_READ_TIME_SIZE", "POSIX_MAX_WRITE_TIME_SIZE"}


def data_for(root: pathlib.Path, name: str) -> pathlib.Path:
    d = root / name
    d.mkdir()
    for i, size in enumerate(SIZES):
        (d / f"part{i}.bin").write_bytes(os.urandom(size))
    return d


def start(tmp_path, args, data, wait, env=None):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, "-m", "tfdarshan", "run", *args, str(script), str(data),
                             str(tmp_path / f"ready-{data.name}"), "wait" if wait else "go"],
                            env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def kill_once_collected(proc, ready: pathlib.Path):
    deadline = time.time() + 180
    while not ready.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert ready.exists(), proc.communicate(timeout=60)[1][-3000:]
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def test_a_rank_killed_after_its_collect_is_in_the_job_log_as_partial(tmp_path):
    logdir = tmp_path / "logs"
    mine = {r: data_for(tmp_path, f"rank{r}") for r in (0, 1)}
    env = lambda r: {"SLURM_PROCID": str(r), "SLURM_NTASKS": "2", "SLURM_JOB_ID": "91"}
    killed = start(tmp_path, ["--logdir", str(logdir)], mine[1], wait=True, env=env(1))
    done = start(tmp_path, ["--logdir", str(logdir)], mine[0], wait=False, env=env(0))
    kill_once_collected(killed, tmp_path / "ready-rank1")
    _, err = done.communicate(timeout=180)
    assert done.returncode == 0, err[-3000:]
    (d,) = [p for p in (logdir / "plugins" / "tfdarshan").iterdir() if p.is_dir()]
    # rank 0 finished, rank 1 left only its live log: no job log by itself
    assert (d / f"{HOST}.rank0.darshan").exists() and not (d / f"{HOST}.rank0{live.SUFFIX}").exists()
    assert (d / f"{HOST}.rank1{live.SUFFIX}").exists() and not (d / f"{HOST}.rank1.darshan").exists()
    assert not list(d.glob("*" + joblog.JOB_SUFFIX))
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "joblog", str(d)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "2 of 2 ranks" in r.stdout and "partial: rank 1" in r.stdout, r.stdout
    assert f"{HOST}.rank1.darshan" in r.stderr and not (d / f"{HOST}.rank1{live.SUFFIX}").exists()
    (job,) = d.glob("*" + joblog.JOB_SUFFIX)
    meta = read_job_record(job)["metadata"]
    assert (meta["ranks"], meta["partial_ranks"]) == ("2", "1")
    part = tfdarshan.read_darshan_log(d / f"{HOST}.rank1.darshan")
    assert "partial" in part.meta["job_metadata"] and part.meta["job_metadata"]["rank"] == "1"
    full = tfdarshan.read_darshan_log(d / f"{HOST}.rank0.darshan")
    got, ref = part.posix.set_index("path"), full.posix.set_index("path")
    for i, size in enumerate(SIZES):
        a, b = got.loc[str(mine[1] / f"part{i}.bin")], ref.loc[str(mine[0] / f"part{i}.bin")]
        # the bytes it read before its collect, exactly
        assert (a["POSIX_BYTES_READ"], a["POSIX_OPENS"], a["POSIX_MAX_BYTE_READ"]) == (size, 1, size - 1)
        # and every other count as the rank that finished has it for the same reads
        counts = [c for c in C.names("POSIX")[0] if c not in TIMES]
        assert list(a[counts]) == list(b[counts]), [c for c in counts if a[c] != b[c]]
        assert 0 < a["POSIX_F_READ_TIME"] and a["POSIX_F_READ_START_TIMESTAMP"] > 0
        # the slowest read was one of the script's: read(1000), the rest, the read at EOF
        first = min(1000, size)
        assert a["POSIX_MAX_READ_TIME_SIZE"] in {first, size - first, 0}, a["POSIX_MAX_READ_TIME_SIZE"]
    # the job log holds rank 1's records as they are in its partial log
    back = tfdarshan.read_darshan_log(job).posix.set_index("path")
    assert all(back.at[str(mine[1] / f"part{i}.bin"), "POSIX_BYTES_READ"] == s for i, s in enumerate(SIZES))


def test_a_killed_flight_recorder_run_is_analysed_as_partial(tmp_path):
    logdir = tmp_path / "logs"
    mine = data_for(tmp_path, "solo")
    proc = start(tmp_path, ["--logdir", str(logdir), "--flight-recorder", "30s"], mine, wait=True)
    kill_once_collected(proc, tmp_path / "ready-solo")
    (left,) = logdir.glob(f"plugins/tfdarshan/*/*{live.SUFFIX}")
    state = live_reader.read(left)
    assert state.identity["metadata"]["source"] == "flight recorder" and state.identity["pid"] == proc.pid
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(left.parent)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "converted 1 live log" in r.stderr and "1 partial" in r.stdout, (r.stdout, r.stderr)
    ranks = read_table(left.parent, "ranks")
    assert list(ranks["partial"]) == [True] and ranks["bytes_read"].iat[0] >= sum(SIZES)
    files = read_table(left.parent, "files").set_index("path")
    assert np.array_equal(files.loc[[str(mine / f"part{i}.bin") for i in range(len(SIZES))], "bytes_read"], SIZES)


def test_every_damaged_header_word_reads_back_or_is_refused(tmp_path):
    """Each of the live log's header words set to values a damaged disk
    gives (0, -1, huge, one word off): reading it gives its state, whole, or
    refuses it with LiveFileError; never another exception (hypothesis once
    found a zero row width that raised IndexError in joblog's recovery)."""
    mine = data_for(tmp_path, "solo")
    proc = start(tmp_path, ["--logdir", str(tmp_path / "logs"), "--flight-recorder", "30s"], mine, wait=True)
    kill_once_collected(proc, tmp_path / "ready-solo")
    (left,) = (tmp_path / "logs").glob(f"plugins/tfdarshan/*/*{live.SUFFIX}")
    whole = left.read_bytes()
    words = np.frombuffer(whole, dtype=np.int64)
    damaged = tmp_path / f"damaged{live.SUFFIX}"
    refused = 0
    for word in range(live.H_ENDED_WALL + 1):
        for value in {0, -1, 1 << 40, int(words[word]) + 8}:
            bad = words.copy()
            bad[word] = value
            damaged.write_bytes(bad.tobytes())
            try:
                state = live_reader.read(damaged, retries=1)
            except live_reader.LiveFileError:
                refused += 1
                continue
            assert state.rows.shape == (len(state.index), len(state.identity["row_fields"])), (word, value)
            assert len(state.paths) == len(state.ids) == len(state.index), (word, value)
    assert refused > 0


@pytest.mark.parametrize("args", [[], ["--steps", "5:6"], ["--flight-recorder", "30s"]])
def test_a_process_that_ends_normally_leaves_no_live_log(tmp_path, args):
    # whole run, a --steps window never reached, the flight recorder (no log at exit)
    logdir = tmp_path / "logs"
    proc = start(tmp_path, ["--logdir", str(logdir), *args], data_for(tmp_path, "normal"), wait=False)
    _, err = proc.communicate(timeout=180)
    assert proc.returncode == 0, err[-3000:]
    assert not list(logdir.rglob("*" + live.SUFFIX)) and not list(logdir.rglob(".*.new"))
    logs = list(logdir.rglob("*.darshan"))
    assert len(logs) == (1 if not args else 0), logs
