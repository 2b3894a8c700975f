"""Every tf.profiler session and Keras profile window records step-aligned
I/O, shown in XProf's trace viewer."""
import glob
import gzip
import json
import math
import os
import pathlib
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

import tfdarshan
from tfdarshan.tf import hooks, profiler_hooks
from tfdarshan.steps.series import AFTER_STEPS, SETUP_STEP, read_parquet
from tf_training import dataset, model, profiled_custom_loop, write_tfrecords
from places import WORKERS

pytestmark = pytest.mark.cost(60)

HOST = socket.gethostname()


def session_dir(logdir) -> pathlib.Path:
    dirs = [d for root in ("profile", "tfdarshan")
            for d in glob.glob(os.path.join(logdir, "**", "plugins", root, "*"), recursive=True)]
    assert len(dirs) == 1, dirs
    return pathlib.Path(dirs[0])


def trace_viewer_events(xplane: pathlib.Path):
    from xprof.convert import raw_to_tool_data
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(xplane)], "trace_viewer", {})
    data = data.decode() if isinstance(data, bytes) else data
    j = json.loads(data)
    return j["traceEvents"] if isinstance(j, dict) else j


def log_bytes(snap):
    return int(snap.posix["POSIX_BYTES_READ"].sum() + snap.posix["POSIX_BYTES_WRITTEN"].sum()
               + snap.stdio["STDIO_BYTES_READ"].sum() + snap.stdio["STDIO_BYTES_WRITTEN"].sum())


def test_keras_tensorboard_profile_batch(tf, tmp_path):
    files = write_tfrecords(tf, tmp_path / "data")
    logdir = tmp_path / "logs"
    m = model(tf)
    m.fit(dataset(tf, files), epochs=1, verbose=0,
          callbacks=[tf.keras.callbacks.TensorBoard(str(logdir), profile_batch=(3, 5))])
    run = session_dir(logdir)
    assert (run / f"{HOST}.xplane.pb").exists()
    snap = tfdarshan.read_darshan_log(run / f"{HOST}.darshan")
    steps = read_parquet(run / f"{HOST}.steps.parquet")
    per_file = read_parquet(run / f"{HOST}.step_files.parquet")
    # the window opens as batch 3 begins: its set-up is (nearly) nothing, and apart
    assert list(steps["step"]) == [SETUP_STEP, 3, 4, 5]
    assert int(steps["bytes_read"].sum() + steps["bytes_written"].sum()) == log_bytes(snap)
    assert int(per_file["bytes_read"].sum()) == int(steps["bytes_read"].sum())
    data_read = snap.posix[snap.posix["path"].isin(files)]
    assert data_read["POSIX_BYTES_READ"].sum() > 0, "the window should include reads of the data files"
    assert snap.meta["job_metadata"]["steps"] == "3:5"
    # the profiler's own output (XProf's <host>.xplane.pb, our files) is not training I/O
    for frame in (snap.posix, snap.stdio):
        assert not frame["path"].str.startswith(str(logdir)).any(), list(frame["path"])
    # Keras' batch-end marker reaches us after the TensorBoard callback stopped
    # the profiler: the last step was cut by the window's end, and says so
    assert list(steps["cut_by_window_end"]) == [False, False, False, True]
    # the trace viewer shows our reads of those files
    evs = trace_viewer_events(run / f"{HOST}.xplane.pb")
    ours = [e for e in evs if e.get("name") == "POSIX read"]
    assert ours and any(e["args"]["file"] in files for e in ours)
    assert {"file", "offset", "bytes", "duration_us"} <= set(ours[0]["args"])
    lines = [e for e in evs if e.get("ph") == "M" and str(e.get("args", {}).get("name", "")).startswith("I/O: ")]
    assert lines, "one trace-viewer line per busy file"


def test_custom_loop_with_trace_markers(tf, tmp_path):
    files = write_tfrecords(tf, tmp_path / "data", files=3)
    logdir = tmp_path / "logs"
    profiled_custom_loop(tf, files, logdir)
    run = session_dir(logdir)
    steps = read_parquet(run / f"{HOST}.steps.parquet")
    # the steps, with what came before the first and after the last apart
    assert list(steps["step"]) == [SETUP_STEP, 0, 1, 2, 3, AFTER_STEPS]
    assert not steps["cut_by_window_end"].any()     # every Trace(step_num) ended before stop()
    snap = tfdarshan.read_darshan_log(run / f"{HOST}.darshan")
    assert int(steps["bytes_read"].sum() + steps["bytes_written"].sum()) == log_bytes(snap)
    assert (steps["start"].diff().dropna() >= 0).all()


def test_profile_context_and_tfdarshan_step(tf, tmp_path):
    files = write_tfrecords(tf, tmp_path / "data", files=2)
    logdir = tmp_path / "logs"
    with tf.profiler.experimental.Profile(str(logdir)):
        for i, batch in enumerate(dataset(tf, files).take(3)):
            with tfdarshan.step(10 + i):
                tf.reduce_sum(batch[0])
    run = session_dir(logdir)
    steps = read_parquet(run / f"{HOST}.steps.parquet")
    assert list(steps["step"]) == [SETUP_STEP, 10, 11, 12, AFTER_STEPS]


def test_profiler_that_fails_to_start_leaves_nothing_started(tf, tmp_path):
    tf.profiler.experimental.start(str(tmp_path / "a"))
    try:
        with pytest.raises(tf.errors.AlreadyExistsError):
            tf.profiler.experimental.start(str(tmp_path / "b"))
        assert profiler_hooks._current is not None and str(profiler_hooks._current.logdir).endswith("a")
    finally:
        tf.profiler.experimental.stop()
    assert profiler_hooks._current is None
    assert not (tmp_path / "b").exists()


def test_disable_restores_tensorflow_exactly(tf):
    from tensorflow.python.profiler import profiler_v2, trace
    assert hooks.enabled()
    wrapped = tf.profiler.experimental.start
    tfdarshan.disable()
    try:
        assert tf.profiler.experimental.start is profiler_v2.start
        assert not hasattr(profiler_v2.start, "__tfdarshan_original__")
        assert not hasattr(trace.Trace.__enter__, "__tfdarshan_original__")
        assert profiler_v2.start is wrapped.__tfdarshan_original__
    finally:
        tfdarshan.enable()
    assert hasattr(tf.profiler.experimental.start, "__tfdarshan_original__")


def test_stats_pull(tmp_path, attached):
    p = tmp_path / "s.bin"
    p.write_bytes(os.urandom(20_000))
    before = tfdarshan.stats()
    with tfdarshan.profile():
        with tfdarshan.step(1):
            p.read_bytes()
        after = tfdarshan.stats()
    assert after["bytes_read"] - before["bytes_read"] >= 20_000
    assert after["last_step"]["step"] == 1
    assert after["last_step"]["bytes_read"] == 20_000 + 0   # one whole-file read and a zero-length one


SCRIPT = """
import os, sys
import numpy as np
import tensorflow as tf
files = sys.argv[1:]
def parse(r):
    f = tf.io.parse_single_example(r, {"x": tf.io.FixedLenFeature([64], tf.float32),
                                        "y": tf.io.FixedLenFeature([], tf.int64)})
    return f["x"], f["y"]
m = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(2)])
m.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
m.fit(tf.data.TFRecordDataset(files, buffer_size=4096).map(parse).batch(16), epochs=1, verbose=0)
if os.environ.get("FAIL_AT_END"):
    raise RuntimeError("the training script failed")
"""


def run_cli(*args, env=None, timeout=600):
    return subprocess.run([sys.executable, "-m", "tfdarshan", "run", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


@pytest.mark.parametrize("steps, fails", [(None, True), ("2:4", False)])
def test_tfdarshan_run_whole_script(tf, tmp_path, steps, fails):
    """A whole script under `run`, its window the whole run or --steps'; the
    whole run's script raises after fit(), and its log holds everything all
    the same (the --steps run ends normally: both ways out are checked)."""
    files = write_tfrecords(tf, tmp_path / "data", files=4)
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    logdir = tmp_path / "logs"
    extra = ["--steps", steps] if steps else []
    r = run_cli("--logdir", str(logdir), *extra, str(script), *files, env={"FAIL_AT_END": "1"} if fails else None)
    if fails:
        assert r.returncode == 1 and "the training script failed" in r.stderr, r.stderr[-3000:]
    else:
        assert r.returncode == 0, r.stderr[-3000:]
    run = session_dir(logdir)
    # one process, one window: one log (--steps once wrote a second one at exit)
    assert sorted(p.name for p in run.glob("*.darshan")) == [f"{HOST}.darshan"]
    snap = tfdarshan.read_darshan_log(run / f"{HOST}.darshan")
    st = read_parquet(run / f"{HOST}.steps.parquet")
    if steps:
        assert list(st["step"]) == [SETUP_STEP, 2, 3, 4, AFTER_STEPS]
    else:
        # the whole run: every data file read completely
        for f in files:
            r_ = snap.posix[snap.posix["path"] == f].iloc[0]
            assert r_["POSIX_BYTES_READ"] == os.path.getsize(f)
        # and Keras' batches are its steps, without asking (4 files of 120 records, batches of 16);
        # with an unknown dataset size Keras begins one more batch, which finds the end of the data
        batches = math.ceil(4 * 120 / 16)
        real = [s for s in st["step"] if s >= 0]
        assert real[:batches] == list(range(1, batches + 1)) and real[batches:] in ([], [batches + 1])
    assert int(st["bytes_read"].sum() + st["bytes_written"].sum()) == log_bytes(snap)


def test_run_without_step_markers_claims_no_step_share(tmp_path):
    """A script with no Keras and no Trace(step_num): the window has no real
    steps, so the tab gives no step-time share instead of inventing one."""
    from tfdarshan_tb import session_data, views
    from tfdarshan.logs.logdir import find_sessions
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 20))
    script = tmp_path / "plain.py"
    script.write_text(f"for _ in range(20):\n    open({str(data)!r}, 'rb').read()\n")
    r = run_cli("--logdir", str(tmp_path / "logs"), str(script))
    assert r.returncode == 0, r.stderr[-3000:]
    (sess,) = find_sessions(tmp_path / "logs")
    summary = views.summary(session_data.SessionData(sess, None))
    assert summary["steps"] == 0 and summary["input_share"] is None
    assert summary["bytes_read"] >= 20 * (1 << 20)


def test_cards_and_table_agree_with_stdio_files(tmp_path):
    """The tab's cards and its table describe the same files: STDIO files
    (numpy's tofile/fromfile use fwrite/fread) are rows too, with the
    counters STDIO lacks shown as unknown, not 0."""
    from tfdarshan_tb import session_data, views
    from tfdarshan.logs.logdir import find_sessions
    posix_file, stdio_file = tmp_path / "posix.bin", tmp_path / "stdio.f8"
    posix_file.write_bytes(os.urandom(300_000))
    script = tmp_path / "mixed.py"
    script.write_text("import numpy as np\n"
                      f"open({str(posix_file)!r}, 'rb').read()\n"
                      f"np.arange(50_000, dtype='f8').tofile({str(stdio_file)!r})\n"
                      f"assert np.fromfile({str(stdio_file)!r}).size == 50_000\n")
    r = run_cli("--logdir", str(tmp_path / "logs"), str(script))
    assert r.returncode == 0, r.stderr[-3000:]
    (sess,) = find_sessions(tmp_path / "logs")
    d = session_data.SessionData(sess, None)
    cards = views.summary(d)
    table = views.files(d, limit=10_000)
    rows = [dict(zip(table["columns"], row)) for row in table["rows"]]
    assert table["total"] == cards["files"] == len(rows)
    assert sum(r_["bytes_read"] for r_ in rows) == cards["bytes_read"]
    assert sum(r_["bytes_written"] for r_ in rows) == cards["bytes_written"] >= 50_000 * 8
    stdio = [r_ for r_ in rows if r_["path"] == str(stdio_file) and r_["interface"] == "STDIO"]
    assert stdio and stdio[0]["bytes_written"] == 50_000 * 8 and stdio[0]["bytes_read"] == 50_000 * 8
    assert stdio[0]["stats"] is None and stdio[0]["seq_fraction"] is None and stdio[0]["zero_reads"] is None
    posix = [r_ for r_ in rows if r_["path"] == str(posix_file)]
    # the Darshan log has no slot for 0-byte reads; the step series beside it counts them
    assert posix[0]["interface"] == "POSIX" and posix[0]["bytes_read"] == 300_000 and posix[0]["zero_reads"] == 1


def test_xprof_lists_only_sessions_with_its_profile(tf, tmp_path):
    """XProf offers every directory under plugins/profile; sessions of ours
    with no XProf profile (`run`, `import`) live under plugins/tfdarshan, so
    XProf's list holds only its own session while the I/O tab shows all."""
    from tb_helpers import fetch, tensorboard
    logdir = tmp_path / "logs"
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 20))
    tf.profiler.experimental.start(str(logdir))
    tf.io.read_file(str(data)).numpy()
    tf.profiler.experimental.stop()
    script = tmp_path / "plain.py"
    script.write_text(f"open({str(data)!r}, 'rb').read()\n")
    assert run_cli("--logdir", str(logdir), str(script)).returncode == 0
    run_log = next(logdir.glob("plugins/tfdarshan/*/*.darshan"))
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "import", str(run_log), "--logdir", str(logdir)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    xprof_sessions = sorted(p.parent.name for p in logdir.glob("plugins/profile/*/*.xplane.pb"))
    assert len(xprof_sessions) == 1
    with tensorboard(logdir) as url:
        status, headers, body = fetch(url, "/data/plugin/profile/runs")
        if headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        assert status == 200 and json.loads(body) == xprof_sessions, body
        status, _, body = fetch(url, "/data/plugin/tfdarshan/runs")
        ours = [s["session"] for run in json.loads(body)["runs"] for s in run["sessions"]]
        assert status == 200 and len(ours) == 3, body


def test_tfdarshan_run_writes_logs_on_sigterm(tmp_path):
    data = tmp_path / "d.bin"
    data.write_bytes(os.urandom(10_000))
    script = tmp_path / "loop.py"
    script.write_text(textwrap.dedent(f"""
        import time
        open({str(tmp_path / 'ready')!r}, 'w').close()
        while True:
            open({str(data)!r}, 'rb').read()
            time.sleep(0.01)
    """))
    p = subprocess.Popen([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(tmp_path / "logs"), str(script)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not (tmp_path / "ready").exists() and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + signal.SIGTERM, err
    snap = tfdarshan.read_darshan_log(session_dir(tmp_path / "logs") / f"{HOST}.darshan")
    r = snap.posix[snap.posix["path"] == str(data)].iloc[0]
    # the SIGTERM lands anywhere in the loop: the last file opened may or
    # may not have been read (a regular file's read is not interrupted)
    opens, read = int(r["POSIX_OPENS"]), int(r["POSIX_BYTES_READ"])
    assert opens >= 1 and read % 10_000 == 0 and opens - 1 <= read // 10_000 <= opens, (opens, read)


def test_run_children_get_their_own_logs(tmp_path):
    d = tmp_path / "data"
    d.mkdir()
    script = tmp_path / "kids.py"
    script.write_text(textwrap.dedent("""
        import os, sys, subprocess, multiprocessing as mp
        def work(p):
            with open(p, "rb") as f:
                return len(f.read())
        if __name__ == "__main__":
            d = sys.argv[1]
            for i in range(3):
                open(f"{d}/f{i}.bin", "wb").write(b"x" * (1000 * (i + 1)))
            work(f"{d}/f0.bin")
            with mp.get_context("spawn").Pool(1) as pool:
                pool.map(work, [f"{d}/f1.bin"])
            subprocess.run([sys.executable, "-c", f"open('{d}/f2.bin','rb').read()"], check=True)
    """))
    r = run_cli("--logdir", str(tmp_path / "logs"), "--children", str(script), str(d))
    assert r.returncode == 0, r.stderr
    run = session_dir(tmp_path / "logs")
    logs = sorted(run.glob("*.darshan"))
    # parent, pool worker, subprocess (and multiprocessing's resource tracker, which reads nothing)
    assert len(logs) >= 3, logs
    readers = {}
    for log in logs:
        snap = tfdarshan.read_darshan_log(log)
        for path, n in zip(snap.posix["path"], snap.posix["POSIX_BYTES_READ"]):
            if path.startswith(str(d)) and n:
                readers.setdefault(path, []).append((log.name, int(n)))
    # each file was read by exactly one process, and counted once
    for i in range(3):
        assert len(readers.get(str(d / f"f{i}.bin"), [])) == 1, (i, [x.name for x in logs], r.stderr[-2000:])
        assert readers[str(d / f"f{i}.bin")][0][1] == 1000 * (i + 1)
    assert readers[str(d / "f0.bin")][0][0] == f"{HOST}.darshan"


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _crash_backtrace(returncode, workdir: pathlib.Path) -> str:
    """gdb's backtrace of a worker that died of SIGABRT, SIGSEGV or SIGBUS
    and left a core in its directory, else "". The core is removed
    (gigabytes each)."""
    cores = sorted(workdir.glob("core*"))
    try:
        if returncode not in (-signal.SIGABRT, -signal.SIGSEGV, -signal.SIGBUS) or not cores:
            return ""
        return subprocess.run(["gdb", "-q", "-batch", "-ex", "bt", sys.executable, str(cores[0])],
                              capture_output=True, text=True, timeout=600).stdout
    finally:
        for core in cores:
            core.unlink()


def _died_in_tensorflow_profiler(backtrace: str) -> bool:
    """True when a worker died of TensorFlow's own crash at
    tf.profiler.experimental.stop() under MultiWorkerMirroredStrategy:
    TraceMeRecorder::Consume follows a dangling pointer to a split event
    (seen here in about 1 of 10 jobs under load, without tfdarshan imported
    too; a SIGSEGV or SIGABRT, or a SIGBUS where the garbage it jumps to
    faults on the stack). Proven by the core's backtrace, never guessed
    from the exit."""
    return "TraceMeRecorder::Consume" in backtrace and "tfd_" not in backtrace


def _allow_core_dumps():
    import resource
    hard = resource.getrlimit(resource.RLIMIT_CORE)[1]
    resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))


@pytest.mark.timeout(1500)
def test_two_workers_write_their_own_files(tf, tmp_path):
    from tfdarshan.logs.logdir import find_sessions, load_snapshot, load_steps
    files = write_tfrecords(tf, tmp_path / "data", files=4, records=200)
    worker = WORKERS / "mwms_worker.py"
    for attempt in range(4):
        logdir = tmp_path / f"logs{attempt}"
        ports = _free_ports(2)
        cluster = {"worker": [f"127.0.0.1:{p}" for p in ports]}
        procs = []
        for i in range(2):
            env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})}
            workdir = tmp_path / f"attempt{attempt}.worker{i}"
            workdir.mkdir()
            procs.append(subprocess.Popen([sys.executable, str(worker), str(logdir), *files], env=env, cwd=workdir,
                                          preexec_fn=_allow_core_dumps, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outs = [p.communicate(timeout=800) for p in procs]
        backtraces = [_crash_backtrace(p.returncode, tmp_path / f"attempt{attempt}.worker{i}")
                      for i, p in enumerate(procs)]
        if not any(map(_died_in_tensorflow_profiler, backtraces)):
            break
        # TensorFlow's bug, not ours: the job is run again, and said so
        print(f"attempt {attempt}: a worker died inside TensorFlow's TraceMeRecorder::Consume; running the job again")
    for p, (out, err), bt in zip(procs, outs, backtraces):
        assert p.returncode == 0, f"{err[-3000:]}\n{bt[-6000:]}"      # a crash's backtrace, to say whose
    logs = sorted(logdir.glob("**/plugins/profile/*/*.darshan"))
    stems = {l.name for l in logs}
    # TF_CONFIG's task index is the worker's rank: <host>.rank<i>, and in the job record
    assert stems == {f"{HOST}.rank{i}.darshan" for i in range(2)}, logs
    for log in logs:
        job = tfdarshan.read_darshan_log(log).meta["job_metadata"]
        assert (job["rank"], job["world_size"], job["launcher"]) == (log.name.split(".rank")[1][0], "2", "TF_CONFIG")
    # downstream, a session merges its workers
    sessions = find_sessions(logdir)
    total = sum(int(tfdarshan.read_darshan_log(l).posix["POSIX_BYTES_READ"].sum()) for l in logs)
    merged = sum(int(load_snapshot(s).posix["POSIX_BYTES_READ"].sum()) for s in sessions)
    assert merged == total > 0
    steps = pd_concat([load_steps(s)[0] for s in sessions])
    assert set(steps["host"]) == {s[:-len(".darshan")] for s in stems}
    assert set(steps["step"]) == {SETUP_STEP, 2, 3, 4, AFTER_STEPS}


def pd_concat(frames):
    import pandas as pd
    return pd.concat(frames, ignore_index=True)
