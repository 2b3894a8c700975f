"""Captures through TensorFlow's profiler server (`client.trace`, as
TensorBoard's capture button does) record I/O too: each worker writes,
beside its own XPlane, the Darshan log of the captured window, with the
I/O lines merged into the XPlane. The window opens when the worker's
watcher sees the capture (within its 100 ms interval when the machine is
idle, later when it is loaded), so the tests take the window's edges from
the log itself: it starts after the capture was asked for and before the
call returned, and holds exactly the worker's reads between its edges (give
or take the read in flight at each edge)."""
import json
import os
import pathlib
import subprocess
import sys
import time

import pytest

import tfdarshan
from tb_helpers import free_port
from places import WORKERS

pytestmark = pytest.mark.cost(85)

WORKER = WORKERS / "server_worker.py"
READ = 4096        # each of the worker's reads (tests/workers/server_worker.py)
CLOCKS = 0.01      # the shim's clock against time.time(), converted through the log's origin


def start_workers(tmp_path, n):
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(1 << 20))
    workers = []
    for i in range(n):
        port = free_port()
        p = subprocess.Popen([sys.executable, str(WORKER), str(port), str(data), str(tmp_path / "stop"),
                              str(tmp_path / f"reads{i}.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        workers.append((port, p, data))
    for _, p, _ in workers:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()[-2000:]
    return workers


def wait_for(pattern_dir: pathlib.Path, glob: str, count: int, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = sorted(pattern_dir.glob(glob))
        if len(found) >= count:
            return found
        time.sleep(0.2)
    raise AssertionError(f"no {glob} under {pattern_dir} after {timeout} s")


def finish(tmp_path, workers):
    (tmp_path / "stop").write_text("")
    reads = []
    for i, (_, p, _) in enumerate(workers):
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        reads.append(json.loads((tmp_path / f"reads{i}.json").read_text()))
    return reads


def window_of(log):
    """The log's window in time.time() seconds, and what it read of the data file."""
    snap = tfdarshan.read_darshan_log(log)
    origin = snap.meta["origin_unix_time"]
    return snap, origin + snap.start, origin + snap.end


def check_window(log, data, worker_reads, t_call, t_return):
    snap, w0, w1 = window_of(log)
    got = int(snap.posix.loc[snap.posix["path"] == str(data), "POSIX_BYTES_READ"].sum())
    inside = sum(n for t, n in worker_reads if w0 <= t <= w1)
    print("capture", (w0 - t_call, w1 - t_call, t_return - t_call), "bytes", got, "reads inside", inside)
    # the watcher can only see a capture that was asked for and still runs
    assert t_call - CLOCKS <= w0 <= t_return and w1 > w0
    # every read between the window's edges, and none outside them: each edge
    # may fall during one read (logged when it began)
    assert got > 0 and abs(got - inside) <= 2 * READ, (got, inside)
    assert got < sum(n for _, n in worker_reads)        # the reads before and after the capture are out


@pytest.fixture(scope="module")
def captures(tf, tmp_path_factory):
    """Two captures of one pair of workers (each worker imports TensorFlow:
    the tests share them): both workers through the profiler client, as
    `client.trace` does; then the first worker alone through the Profile
    tab's "Capture Profile" button, TensorBoard's XProf plugin asking the
    worker's profiler server for the trace (its capture route, as the
    button's dialog calls it). Then the workers' own record of their reads."""
    from tb_helpers import fetch, tensorboard
    root = tmp_path_factory.mktemp("captures")
    workers = start_workers(root, 2)
    client_dir, tb_dir = root / "logs", root / "tb"
    tb_dir.mkdir()
    try:
        time.sleep(1.0)                                  # reads before the capture, to keep out
        t_call = time.time()
        tf.profiler.experimental.client.trace(",".join(f"grpc://127.0.0.1:{port}" for port, _, _ in workers),
                                              str(client_dir), 2000)
        client = {"t_call": t_call, "t_return": time.time()}
        client["logs"] = wait_for(client_dir, "plugins/profile/*/*.darshan", len(workers))
        time.sleep(1.0)                                  # reads after it, to keep out too
        port = workers[0][0]
        with tensorboard(tb_dir) as url:
            t_call = time.time()
            status, _, body = fetch(url, f"/data/plugin/profile/capture_profile?service_addr=127.0.0.1:{port}"
                                         "&duration=2000&num_retry=0&host_tracer_level=2")
            button = {"t_call": t_call, "t_return": time.time(), "status": status, "body": body[:500]}
            if status == 200:
                (button["log"],) = wait_for(tb_dir, "plugins/profile/*/*.darshan", 1)
                deadline = time.time() + 60        # the tab re-reads the log directory every few seconds
                while True:
                    status, _, body = fetch(url, "/data/plugin/tfdarshan/runs")
                    listed = [h for r in json.loads(body)["runs"] for s in r["sessions"] for h in s["hosts"]]
                    if listed or time.time() > deadline:
                        break
                    time.sleep(0.5)
                button.update(runs_status=status, listed=listed)
    finally:
        reads = finish(root, workers)
    return {"workers": workers, "reads": reads, "client": client, "client_dir": client_dir, "button": button}


def test_profiler_server_capture_records_the_window(captures):
    """One capture of two workers (a single worker's capture is the capture
    button's, test_tensorboards_capture_button_records_io)."""
    workers, reads, c = captures["workers"], captures["reads"], captures["client"]
    logs = c["logs"]
    # each worker's log is named after its own XPlane (<host>_<port>)
    assert sorted(x.name for x in logs) == sorted(f"127.0.0.1_{port}.darshan" for port, _, _ in workers)
    for (port, _, data), worker_reads in zip(workers, reads):
        (log,) = [x for x in logs if x.name == f"127.0.0.1_{port}.darshan"]
        check_window(log, data, worker_reads, c["t_call"], c["t_return"])
        # the worker's XPlane got the I/O lines, and the tab lists the session
        xp = log.with_name(log.name.replace(".darshan", ".xplane.pb"))
        from xprof.convert import raw_to_tool_data
        events, _ = raw_to_tool_data.xspace_to_tool_data([str(xp)], "trace_viewer", {})
        assert b"POSIX read" in (events if isinstance(events, bytes) else events.encode())
    from tfdarshan.logs.logdir import find_sessions
    (session,) = find_sessions(captures["client_dir"])
    assert len(session.hosts) == len(workers)


LOCAL = """
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
import tfdarshan
from tfdarshan.tf import capture_watch
tf.profiler.experimental.server.start(int(sys.argv[1]))
for _ in range(3):          # the process's own sessions, with the server's watcher running
    tf.profiler.experimental.start(sys.argv[2])
    for _ in range(20):
        tf.add(tf.constant(1), 1)
        open(sys.argv[3], "rb").read()
        time.sleep(0.01)
    tf.profiler.experimental.stop()
    time.sleep(0.3)
time.sleep(1.0)
print("captures", capture_watch._watcher.captures)
"""


def test_local_sessions_are_not_taken_for_captures(tf, tmp_path):
    """A worker's own tf.profiler sessions raise the same trace level a
    capture does: they give their own logs, and the watcher none."""
    script = tmp_path / "local.py"
    script.write_text(LOCAL)
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(10_000))
    r = subprocess.run([sys.executable, str(script), str(free_port()), str(tmp_path / "logs"), str(data)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "captures 0" in r.stdout
    import socket
    logs = sorted((tmp_path / "logs").glob("plugins/profile/*/*.darshan"))
    # three sessions of this process (two in one second share XProf's run directory: <host>_<pid>)
    host = socket.gethostname()
    assert len(logs) == 3 and all(x.name == f"{host}.darshan" or x.name.startswith(f"{host}_") for x in logs), logs


def test_tensorboards_capture_button_records_io(captures):
    """The Profile tab's "Capture Profile" button (the second capture of
    the first worker, after the client's of both): the worker writes its
    XPlane and ours into TensorBoard's log directory, and the I/O tab lists
    the session."""
    (port, _, data), b = captures["workers"][0], captures["button"]
    assert b["status"] == 200 and b"error" not in b["body"].lower(), b["body"]
    assert b["runs_status"] == 200 and b["listed"] == [f"127.0.0.1_{port}"]
    check_window(b["log"], data, captures["reads"][0], b["t_call"], b["t_return"])
