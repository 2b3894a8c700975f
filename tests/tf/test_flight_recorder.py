"""The continuous recording and the I/O flight recorder.

The ring's cut of a span equals a profiling window over the same span;
`tfdarshan run --flight-recorder` dumps exactly once for a step made slow
by a file on the slow FUSE tier, with that file and only the I/O up to the
slow step's end; SIGUSR2 dumps (and the program's own handler still runs);
a storm of slow steps is rate-limited, while an operator's requests (SIGUSR2,
dump()) right after an automatic dump are each served. Step times are sleeps of 0.1 s
against a 10x threshold, so a loaded machine cannot fake a slow step."""
import datetime
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import slow_tier
import tfdarshan
from tfdarshan.capture import counters as C
from tfdarshan.capture.recorder import RECORDER
from tfdarshan.capture.ring import Ring
from tfdarshan.logs.logdir import find_sessions

pytestmark = [pytest.mark.cost(60), pytest.mark.timeout(300)]


def _dumps(logdir):
    return [s for s in find_sessions(logdir) if "_flight_" in s.name]


def _log(session):
    (stem,) = session.hosts
    return tfdarshan.read_darshan_log(str(session.directory / f"{stem}.darshan"))


def _tfdarshan_run(args, **kw):
    return subprocess.Popen([sys.executable, "-m", "tfdarshan", "run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


# ------------------------------------------------------------------- the ring
@pytest.fixture
def attached():
    """Attached for the test; the process is left as it was found."""
    fresh = tfdarshan.attach()
    yield
    if fresh:
        tfdarshan.detach()


def test_a_cut_of_the_ring_equals_a_window_over_the_same_span(tmp_path, attached):
    files = []
    for i in range(5):
        files.append(tmp_path / f"f{i}.bin")
        files[-1].write_bytes(os.urandom(100_000 + 7_777 * i))
    ring = Ring(RECORDER, 60, interval=0.05).start()
    try:
        with RECORDER._lock:                  # no collector interval between the two
            window = RECORDER.open_window()
            t0 = ring._last_end               # the window's start snapshot closed an interval
        for rnd in range(4):                  # several intervals, with the collector between them
            for i, p in enumerate(files):
                with open(p, "r+b") as f:
                    f.seek(1000 * rnd)
                    f.read(4096 * (i + 1))
                    f.read(10)
                    if i % 2:
                        f.write(b"x" * (513 * (rnd + 1)))
                    os.fsync(f.fileno())
            np.fromfile(files[0], dtype=np.uint8)                 # STDIO (fopen/fread) too
            np.arange(100 * (rnd + 1), dtype=np.int64).tofile(tmp_path / "out.bin")
            time.sleep(0.12)
        with RECORDER._lock:
            expected = window.close()
            t1 = ring._last_end
        cut = ring.cut(t0, t1)
        assert len(cut.pieces) >= 4
        got = ring.window(cut)
    finally:
        ring.stop()
    for module in C.MODULES:
        a = expected.frame(module).sort_values("record_id").reset_index(drop=True)
        b = got.frame(module).sort_values("record_id").reset_index(drop=True)
        assert len(a) and list(a["path"]) == list(b["path"])
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=0, atol=1e-6)
    # the same collects bound both; a snapshot reads its clock just after its collect
    assert got.start <= expected.start < got.start + 0.05
    assert got.end <= expected.end < got.end + 0.05


def test_the_ring_keeps_within_its_memory_cap_and_counts_what_it_drops(tmp_path, attached):
    paths = []
    for i in range(300):
        paths.append(tmp_path / f"s{i}.bin")
        paths[-1].write_bytes(b"y" * 100)
    cap = 2 << 20                             # about six intervals of 300 records
    ring = Ring(RECORDER, 3600, memory_cap=cap, interval=0.05).start()
    try:
        while ring.dropped_intervals < 3:
            for p in paths:                   # every interval touches 300 records
                with open(p, "rb") as f:
                    f.read()
            RECORDER.collect()
        s = ring.stats()
    finally:
        ring.stop()
    assert s["peak_memory"] <= cap and s["memory"] <= cap
    assert s["dropped_seconds"] > 0 and s["intervals"] >= 1


def test_intervals_of_uneven_size_never_overwrite_each_other_when_the_arena_wraps(tmp_path, attached):
    # the ring's collector waits an hour, and the recorder's lock, held
    # throughout, keeps its 10 s background collect out: only the collects
    # below close intervals, so each holds exactly the files read just before it
    ring = Ring(RECORDER, 3600, memory_cap=1 << 20, interval=3600).start()
    try:
        with RECORDER._lock:
            held = _fill_and_wrap(ring, tmp_path)
        # the second interval (at the arena's end) went before the third,
        # which the fourth overwrote: only the fourth is left
        assert len(held) == 1
    finally:
        ring.stop()


def _fill_and_wrap(ring, tmp_path):
    rows = ring._row_cap
    # the third interval wraps to the arena's start; the fourth wraps again
    # while the second still sits at the end, past the rows it overwrites
    sizes = [int(rows * f) for f in (0.88, 0.12, 0.18, 0.85)]
    kept = []
    for n, size in enumerate(sizes):
        for i in range(size):
            p = tmp_path / f"i{n}_{i}"
            p.write_bytes(b"z")
            p.read_bytes()
        start = ring._last_end
        iv = RECORDER.collect()
        assert len(iv.index) >= size
        kept.append((start, iv.now_ticks, iv.after.copy()))
        assert ring.stats()["peak_memory"] <= ring.memory_cap
        # every interval the ring still holds has its own rows, unchanged
        held = [(a, b, after) for a, b, after in kept if ring.cut(a, b).pieces]
        assert held and held[-1][1] == iv.now_ticks
        for a, b, after in held:
            (piece,) = ring.cut(a, b).pieces
            np.testing.assert_array_equal(piece.after, after)
    return held


# --------------------------------------------------------- the flight recorder
LOOP = """
import os, sys, time, tfdarshan
normal, slow, steps, slow_step = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
fr = tfdarshan.flight_recorder()          # the one `tfdarshan run --flight-recorder` started
assert fr.seconds == 60, fr.seconds
for i in range(steps):
    with tfdarshan.step(i):
        with open(normal, "rb") as f:
            f.read()
        time.sleep(0.1)
        if i == slow_step:
            with open(slow, "rb") as f:     # on the slow tier: about 3 s
                f.read()
"""


def test_a_slow_step_gives_exactly_one_dump_with_the_slow_file(tmp_path):
    slow_tier.skip_unless_available()
    from case_studies.slowfs import mounted
    data = tmp_path / "data"
    data.mkdir()
    normal = tmp_path / "normal.bin"
    normal.write_bytes(os.urandom(200_000))
    (data / "slow.bin").write_bytes(os.urandom(90_000))       # one read request on the tier
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    logdir = tmp_path / "logs"
    steps, slow_step = 36, 28
    with mounted(str(data), str(tmp_path / "mnt"), meta_latency=0.0, read_latency=3.0, bandwidth="1G") as mnt:
        p = _tfdarshan_run(["--logdir", str(logdir), "--flight-recorder", "60s", "--slow-factor", "10",
                            str(script), str(normal), os.path.join(mnt, "slow.bin"), str(steps), str(slow_step)])
        out, err = p.communicate(timeout=200)
    assert p.returncode == 0, err[-3000:]
    dumps = _dumps(logdir)
    assert len(dumps) == 1, err[-3000:]
    log = _log(dumps[0])
    meta = log.meta["job_metadata"]
    assert meta["source"] == "flight recorder" and meta["trigger"] == "slow step"
    assert meta["slow_step"] == str(slow_step) and f"step {slow_step} took" in meta["reason"]
    posix = log.posix.set_index("path")
    slow_path = os.path.join(str(tmp_path / "mnt"), "slow.bin")
    assert posix.loc[slow_path, "POSIX_BYTES_READ"] == 90_000
    assert posix.loc[slow_path, "POSIX_F_READ_TIME"] > 2.9          # the tier sleeps 3 s in the read
    # every read up to the slow step's end, and none after it (the window closes there)
    assert posix.loc[str(normal), "POSIX_BYTES_READ"] == 200_000 * (slow_step + 1)
    series = pd.read_parquet(next(dumps[0].directory.glob("*.steps.parquet")))
    real = series[series["step"] >= 0]
    assert real["step"].max() == slow_step
    assert real.loc[real["read_time"].idxmax(), "step"] == slow_step
    # the advisor reads the dump like any session
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "recommend", str(logdir), "--fast-tier", "/dev/shm",
                        "--format", "json"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert any(slow_path == f["path"] for f in json.loads(r.stdout)["files"])


WAIT_FOR_SIGNAL = """
import os, pathlib, signal, sys, time, tfdarshan
data, ready, done = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
handled = []
signal.signal(signal.SIGUSR2, lambda *_: handled.append(1))    # the program's own handler
fr = tfdarshan.flight_recorder(seconds=60, logdir=sys.argv[4])
with open(data, "rb") as f:
    f.read()
ready.write_text("1")
deadline = time.time() + 120
while not done.exists() and time.time() < deadline:
    time.sleep(0.05)
fr.stop()
print(len(handled))
"""


def _wait_for(condition, proc, deadline):
    """Until condition() holds, the deadline passes or the process ends; condition() then."""
    while not condition() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    return condition()


def test_sigusr2_dumps_and_the_programs_own_handler_still_runs(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(77_777))
    script = tmp_path / "wait.py"
    script.write_text(WAIT_FOR_SIGNAL)
    ready, done, logdir = tmp_path / "ready", tmp_path / "done", tmp_path / "logs"
    p = subprocess.Popen([sys.executable, str(script), str(data), str(ready), str(done), str(logdir)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        assert _wait_for(ready.exists, p, deadline)
        os.kill(p.pid, signal.SIGUSR2)
        _wait_for(lambda: _dumps(logdir), p, deadline)
        done.write_text("1")
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 0, err[-3000:]
    assert out.strip() == "1"                 # the program's handler ran once
    (dump,) = _dumps(logdir)
    log = _log(dump)
    assert log.meta["job_metadata"]["trigger"] == "signal"
    assert log.posix.set_index("path").loc[str(data), "POSIX_BYTES_READ"] == 77_777


STORM = """
import json, sys, time, tfdarshan
fr = tfdarshan.flight_recorder(seconds=30, logdir=sys.argv[1], slow_factor=10, min_gap=float(sys.argv[2]),
                               max_dumps=int(sys.argv[3]))
for i in range(26):
    with tfdarshan.step(i):
        time.sleep(0.1 if i < 20 else 1.5)     # six steps 15x the median
fr.stop()
print(json.dumps({"suppressed": sum(fr.suppressed.values()), "judgments": [j._asdict() for j in fr.judgments]}))
"""


@pytest.mark.parametrize("min_gap,max_dumps,expected", [(600, 10, 1), (0, 2, 2)])
def test_a_storm_of_slow_steps_is_rate_limited(tmp_path, min_gap, max_dumps, expected):
    script = tmp_path / "storm.py"
    script.write_text(STORM)
    logdir = tmp_path / "logs"
    r = subprocess.run([sys.executable, str(script), str(logdir), str(min_gap), str(max_dumps)],
                       capture_output=True, text=True, timeout=200)
    assert r.returncode == 0, r.stderr[-3000:]
    dumps = _dumps(logdir)
    got = json.loads(r.stdout)
    assert len(dumps) == expected, got
    storm = [j for j in got["judgments"] if j["step"] >= 20]
    # each of the six slow steps triggered, but for one a dump was written
    # during and that is not slow without it (its time net of the dump);
    # what did not dump was counted
    assert [j["step"] for j in storm] == list(range(20, 26))
    for j in storm:
        assert j["slow"] or (j["own"] > 0 and j["seconds"] - j["own"] <= 10 * j["median"]), j
    assert got["suppressed"] == sum(j["slow"] for j in storm) - expected, got
    triggers = {_log(d).meta["job_metadata"]["trigger"] for d in dumps}
    assert triggers == {"slow step"}


@pytest.mark.parametrize("args,message", [
    (["--flight-recorder", "soon"], "not a duration"),
    (["--flight-recorder", "10s", "--steps", "1:2"], "do not go together"),
    (["--flight-recorder", "10s", "--slow-factor", "1"], "above 1"),
    (["--flight-recorder", "10s", "--ring-memory", "10%"], "--ring-memory"),
])
def test_bad_flight_recorder_options_are_one_line_errors(tmp_path, args, message):
    script = tmp_path / "s.py"
    script.write_text("print('ran')\n")
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(tmp_path / "l"), *args,
                        str(script)], capture_output=True, text=True, timeout=60)
    # argparse's usage line may come first, as everywhere in the CLI; the error is one line
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert message in r.stderr.strip().splitlines()[-1] and "ran" not in r.stdout
    assert not (tmp_path / "l").exists()


OPERATOR = """
import os, pathlib, sys, time, tfdarshan
logdir, data, ready, done = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3]), pathlib.Path(sys.argv[4])
# the default automatic gap (300 s): only the slow step below dumps on its own
fr = tfdarshan.flight_recorder(seconds=60, logdir=logdir, slow_factor=5, warmup_steps=3)
for i in range(5):
    with tfdarshan.step(i):
        time.sleep(0.02 if i < 4 else 1.0)     # step 4: 50x the median
with open(data, "rb") as f:
    f.read()
ready.write_text("1")
deadline = time.time() + 120
while not done.exists() and time.time() < deadline:
    time.sleep(0.05)
a, b = fr.dump(), fr.dump()                  # back to back: the second waits out the operator gap
fr.stop()
print(a)
print(b)
"""


def test_operator_requests_right_after_an_automatic_dump_are_never_dropped(tmp_path):
    # each signal is sent once the previous dump is on disk: every ordering of
    # the writer, the gap and the signals must give one more dump
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(54_321))
    script = tmp_path / "operator.py"
    script.write_text(OPERATOR)
    logdir, ready, done = tmp_path / "logs", tmp_path / "ready", tmp_path / "done"
    p = subprocess.Popen([sys.executable, str(script), str(logdir), str(data), str(ready), str(done)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 180
        assert _wait_for(lambda: ready.exists() and len(_dumps(logdir)) == 1, p, deadline), "no slow-step dump"
        for n in (2, 3):
            os.kill(p.pid, signal.SIGUSR2)
            assert _wait_for(lambda: len(_dumps(logdir)) == n, p, deadline), f"signal {n - 1} gave no dump"
        done.write_text("1")
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 0, err[-3000:]
    dumps = sorted(_dumps(logdir), key=lambda s: int(s.name.rsplit("_", 1)[1]))
    triggers = [_log(d).meta["job_metadata"]["trigger"] for d in dumps]
    assert triggers == ["slow step", "signal", "signal", "on demand", "on demand"]
    assert [str(d.directory) for d in dumps[3:]] == out.split()
    # the signals' dumps hold what was read before the signal
    for d in dumps[1:3]:
        assert _log(d).posix.set_index("path").at[str(data), "POSIX_BYTES_READ"] == 54_321


def test_stop_detaches_only_what_start_attached(tmp_path):
    # given a detached process, a recorder started and stopped leaves it detached
    assert not tfdarshan.is_attached()
    fr = tfdarshan.flight_recorder(seconds=5, logdir=str(tmp_path / "a"))
    assert tfdarshan.is_attached()
    fr.stop()
    assert not tfdarshan.is_attached()
    # and one started while the user holds the shim attached leaves it so
    tfdarshan.attach()
    try:
        fr = tfdarshan.flight_recorder(seconds=5, logdir=str(tmp_path / "b"))
        fr.stop()
        assert tfdarshan.is_attached()
    finally:
        tfdarshan.detach()


STEADY_THEN_SIGNAL = """
import json, os, pathlib, sys, time, tfdarshan
from tfdarshan.tf import session as session_mod

logdir, data, ready = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
writes = []         # when each dump was being written, on this process's clock
real_write = session_mod.write_or_fall_back

def timed_write(*args, **kwargs):
    began = time.monotonic()
    try:
        return real_write(*args, **kwargs)
    finally:
        writes.append((began, time.monotonic()))

session_mod.write_or_fall_back = timed_write
FACTOR = 3.0
fr = tfdarshan.flight_recorder(seconds=30, logdir=logdir, slow_factor=FACTOR, warmup_steps=5, min_gap=0,
                               max_dumps=100)
spans = []          # (step, before it, first line inside, last line inside, after it)

def step(i, seconds, until=lambda: True):
    t0 = time.monotonic()
    with tfdarshan.step(i):
        t1 = time.monotonic()
        with open(data, "rb") as f:
            f.read()
        time.sleep(seconds)
        while not until():
            time.sleep(0.005)
        t2 = time.monotonic()
    spans.append((i, t0, t1, t2, time.monotonic()))

n = 0
for _ in range(10):
    step(n, 0.02); n += 1
ready.write_text("1")                   # the test sends SIGUSR2 now
deadline = time.monotonic() + 120
while fr.stats()["dumping"] == 0 and time.monotonic() < deadline:
    step(n, 0.02); n += 1               # steady steps until a dump is under way ...
step(n, 0.02, until=lambda: fr.stats()["dumping"] == 0); n += 1     # ... and one that lasts until it ends
while (fr.stats()["signals"] == 0 or fr.busy()) and time.monotonic() < deadline:
    step(n, 0.02); n += 1
for _ in range(10):
    step(n, 0.02); n += 1
# a real slow step, with no dump under way or waiting, longer than FACTOR x
# the longest step so far that a dump did not overlap (the median is of those)
while fr.busy():
    time.sleep(0.01)
own = {j.step: j.own for j in fr.judgments}
slow = n
step(n, 1.5 * FACTOR * max(s[4] - s[1] for s in spans if not own.get(s[0]))); n += 1
while fr.busy():
    time.sleep(0.01)
fr.stop()
print(json.dumps({"spans": spans, "writes": writes, "dumps": [str(d) for d in fr.dumps], "slow": slow,
                  "judgments": [j._asdict() for j in fr.judgments]}))
"""


def test_sigusr2_during_steady_steps_fires_no_slow_step_dump(tmp_path):
    # The dump a signal asks for stalls the steps it overlaps (it holds the
    # GIL and a core); one step here lasts until the dump has ended, as a
    # stalled step does. Asserted from events, whatever the latency: the time
    # a dump was written during a step (on the program's own clock) is taken
    # out of that step's time; a step is found slow only when its time
    # outside the dumps' writing is itself over 3x the median; and a step
    # made longer than 3x the longest step a dump did not overlap still dumps.
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(20_000))
    script = tmp_path / "steady.py"
    script.write_text(STEADY_THEN_SIGNAL)
    logdir, ready = tmp_path / "logs", tmp_path / "ready"
    p = subprocess.Popen([sys.executable, str(script), str(logdir), str(data), str(ready)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert _wait_for(ready.exists, p, time.time() + 120)
        os.kill(p.pid, signal.SIGUSR2)
        out, err = p.communicate(timeout=200)
    finally:
        p.kill()
    assert p.returncode == 0, err[-3000:]
    got = json.loads(out)
    # the dumps in the order they were written, each with its trigger
    metas = [tfdarshan.read_darshan_log(next(pathlib.Path(d).glob("*.darshan"))).meta["job_metadata"]
             for d in got["dumps"]]
    assert len(metas) == len(got["writes"])
    assert [m["trigger"] for m in metas].count("signal") == 1
    eps = 0.002                 # the recorder's clock (the TSC) against the program's, on one step
    judged = {j["step"]: j for j in got["judgments"]}
    spans = {i: (before, inside, last, after) for i, before, inside, last, after in got["spans"]}
    writing = {i: sum(max(0.0, min(last, e) - max(inside, b)) for b, e in got["writes"])
               for i, (_, inside, last, _) in spans.items()}
    for i, j in judged.items():
        before, _, _, after = spans[i]
        # the dumps' writing inside the step is taken out of its time, at least
        assert j["own"] >= writing[i] - eps, (i, j, writing[i])
        # found slow only when slow without the dumps
        if j["slow"]:
            assert (after - before) - writing[i] > 3.0 * j["median"] - eps, (i, j, writing[i])
    slow_dumps = [int(m["slow_step"]) for m in metas if m["trigger"] == "slow step"]
    assert all(judged[i]["slow"] for i in slow_dumps)
    # a real slow step still dumps
    assert got["slow"] in slow_dumps and judged[got["slow"]]["own"] == 0


NO_CHDIR = """
import sys, traceback
moves = []
sys.addaudithook(lambda event, args: moves.append("".join(traceback.format_stack(limit=8)))
                 if event == "os.chdir" else None)
import tfdarshan
data, logdir = sys.argv[1], sys.argv[2]
fr = tfdarshan.flight_recorder(seconds=30, logdir=logdir)
for i in range(3):
    with tfdarshan.step(i):
        open(data, "rb").read()
fr.dump()                       # the first dump: counter names, the log writer's library
fr.stop()
with tfdarshan.profile(logdir=logdir):
    open(data, "rb").read()
print(len(moves))
print("".join(moves[:1]), file=sys.stderr)
"""


def test_dumps_and_logs_never_move_the_working_directory(tmp_path):
    # PyDarshan's import changes the working directory while it loads its
    # library; a training's threads opening relative paths during the flight
    # recorder's first dump then failed (FileNotFoundError). Seen by Python's
    # audit hook, which every os.chdir passes through.
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(5000))
    script = tmp_path / "nochdir.py"
    script.write_text(NO_CHDIR)
    r = subprocess.run([sys.executable, str(script), str(data), str(tmp_path / "logs")], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-1] == "0", r.stderr[-3000:]
    assert len(_dumps(tmp_path / "logs")) == 1


def test_a_dump_is_named_by_its_own_time(tmp_path):
    """Every dump directory carried the recorder's start time, not the
    dump's (issue 22)."""
    fr = tfdarshan.flight_recorder(seconds=30, logdir=str(tmp_path))
    try:
        started = time.time()
        (tmp_path / "x.bin").write_bytes(b"x" * 1000)
        (tmp_path / "x.bin").read_bytes()
        time.sleep(1.2)                       # a second later at least: the names differ in their seconds
        asked = time.time()
        out = fr.dump("asked from the test")
    finally:
        fr.stop()
    stamp = datetime.datetime.strptime(out.name.split("_flight_")[0], "%Y_%m_%d_%H_%M_%S").timestamp()
    # the name's second is the dump's (at or after it was asked for), past the recorder's start
    assert int(asked) <= stamp <= time.time() and stamp > int(started)
