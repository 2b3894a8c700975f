"""How long a rank takes from SIGTERM to exit, with its log written.

    python benchmarks/bench_shutdown.py [--files 10000] [--runs 7] [--sigkill-after 1.0] [--no-tensorflow]

A rank (TensorFlow imported, as a training rank has it) reads --files small
files in ten steps marked with tfdarshan.step, says it is ready, and waits;
it is then sent SIGTERM, and SIGKILL --sigkill-after seconds later if it is
still there, as Open MPI's mpirun does to the other ranks when one dies
(`odls_base_sigkill_timeout`: 1 s; Slurm's KillWait is 30 s). Each run
starts the same script twice, in a shuffled order: plainly (SIGTERM's
default action ends it at once: the floor) and under `tfdarshan run`.

Reported, over the runs: signal-to-exit wall time (median, its 95 %
bootstrap interval and the runs' range), the CPU time the process spent
between the signal and its exit (all threads: /proc/<pid>/stat before the
signal, wait4's rusage after), and what each tfdarshan run left: its log
written (not partial) in how many runs, else its live log (converted here,
and checked to hold every file's bytes)."""
from __future__ import annotations

import argparse
import os
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

sys.path.insert(0, str(pathlib.Path(__file__).parent))
from intervals import median_interval  # noqa: E402

SIZE = 100          # bytes a file
RANK = textwrap.dedent("""
    import os, pathlib, sys, time
    data, ready, n, use_tf = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
    if use_tf:
        import tensorflow as tf  # noqa: F401 - a training rank's process, with its libraries and threads
    if sys.argv[5] == "marked":
        import tfdarshan
        step = tfdarshan.step
    else:
        import contextlib
        step = lambda i: contextlib.nullcontext()   # noqa: E731
    per = -(-n // 10)
    for s in range(10):
        with step(s):
            for i in range(s * per, min(n, (s + 1) * per)):
                with open(data / f"f{i}.bin", "rb") as f:
                    f.read()
    ready.write_text("ready")
    time.sleep(3600)
""")


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (all its threads), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def one(mode: str, work: pathlib.Path, data: pathlib.Path, files: int, use_tf: bool, sigkill_after: float,
        n: int) -> dict:
    ready = work / f"ready-{mode}-{n}"
    logdir = work / f"logs-{n}"
    script = work / "rank.py"
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}
    if mode == "plain":
        cmd = [sys.executable, str(script)]
    else:
        cmd = [sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(script)]
    p = subprocess.Popen(cmd + [str(data), str(ready), str(files), "1" if use_tf else "0",
                                "plain" if mode == "plain" else "marked"], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while not ready.exists():
        if p.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"{mode}: the rank did not start: {p.stderr.read().decode()[-2000:]}")
        time.sleep(0.02)
    time.sleep(0.2)                       # past its last write: the rank waits
    before = cpu_ticks(p.pid)
    sent = time.perf_counter()
    p.send_signal(signal.SIGTERM)
    killed = False
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if not killed and time.perf_counter() - sent >= sigkill_after:
            p.send_signal(signal.SIGKILL)
            killed = True
        time.sleep(0.001)
    took = time.perf_counter() - sent
    p.returncode = os.waitstatus_to_exitcode(status)
    cpu = (usage.ru_utime + usage.ru_stime) - before / os.sysconf("SC_CLK_TCK")
    out = {"seconds": took, "cpu": cpu, "killed": killed, "code": p.returncode}
    if mode == "tfdarshan":
        out.update(outcome(logdir, data, files))
    p.stderr.close()
    return out


def outcome(logdir: pathlib.Path, data: pathlib.Path, files: int) -> dict:
    """Whether the run wrote its log, else what its live log holds once converted."""
    import tfdarshan
    from tfdarshan.capture import live
    from tfdarshan.logs import live_log
    [session] = [d for d in (logdir / "plugins" / "tfdarshan").iterdir() if d.is_dir()]
    written = [p for p in session.glob("*.darshan")]
    left = list(session.glob(f"*{live.SUFFIX}"))
    if written and not left:
        how = "log"
    else:
        live_log.recover(session)
        how = "live"
        written = list(session.glob("*.darshan"))
    [log] = written
    snap = tfdarshan.read_darshan_log(log)
    p = snap.posix[snap.posix["path"].str.startswith(str(data))]
    ok = len(p) == files and int(p["POSIX_BYTES_READ"].sum()) == files * SIZE
    return {"left": how, "complete": ok, "partial": "partial" in snap.meta["job_metadata"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--sigkill-after", type=float, default=1.0,
                    help="seconds from SIGTERM to SIGKILL (Open MPI's mpirun: 1)")
    ap.add_argument("--no-tensorflow", action="store_true", help="a rank without TensorFlow imported")
    args = ap.parse_args(argv)
    use_tf = not args.no_tensorflow
    with tempfile.TemporaryDirectory(prefix="tfd-shutdown-", dir=os.environ.get("TFD_BENCH_DIR")) as d:
        work = pathlib.Path(d)
        data = work / "data"
        data.mkdir()
        for i in range(args.files):
            (data / f"f{i}.bin").write_bytes(b"x" * SIZE)
        (work / "rank.py").write_text(RANK)
        got = {"plain": [], "tfdarshan": []}
        for n in range(args.runs):
            order = ["plain", "tfdarshan"]
            random.Random(n).shuffle(order)
            for mode in order:
                got[mode].append(one(mode, work, data, args.files, use_tf, args.sigkill_after, n))
                r = got[mode][-1]
                print(f"run {n + 1}/{args.runs} {mode:9s}: {r['seconds']:.3f} s to exit, {r['cpu']:.3f} s CPU"
                      + (f", left its {r['left']}{'' if r['complete'] else ' (INCOMPLETE)'}"
                         if mode == "tfdarshan" else ""), file=sys.stderr)
    print(f"{args.files} files, TensorFlow {'imported' if use_tf else 'not imported'}, {args.runs} runs "
          f"(shuffled, plain and under `tfdarshan run`), SIGKILL {args.sigkill_after:g} s after SIGTERM")
    for mode, runs in got.items():
        wall = [r["seconds"] for r in runs]
        cpu = [r["cpu"] for r in runs]
        lo, hi = median_interval(wall)
        clo, chi = median_interval(cpu)
        print(f"  {mode:9s} SIGTERM to exit: median {statistics.median(wall):.3f} s (95 % interval {lo:.3f}-{hi:.3f}, "
              f"range {min(wall):.3f}-{max(wall):.3f}); CPU from the signal on: median {statistics.median(cpu):.3f} s "
              f"(95 % interval {clo:.3f}-{chi:.3f}, range {min(cpu):.3f}-{max(cpu):.3f})")
    t = got["tfdarshan"]
    logs = sum(r["left"] == "log" for r in t)
    complete = sum(r["complete"] for r in t)
    print(f"  tfdarshan: its log written before exit in {logs} of {len(t)} runs; SIGKILLed first in "
          f"{sum(r['killed'] for r in t)}; every file's bytes in the session afterwards (log, or live log "
          f"converted) in {complete} of {len(t)}")
    return 0 if complete == len(t) else 1


if __name__ == "__main__":
    sys.exit(main())
