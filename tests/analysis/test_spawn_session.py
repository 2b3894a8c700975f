"""A session holding a process that read nothing goes through `analyze`.
Under `tfdarshan run --children`, a script starts 3 multiprocessing spawn
workers; multiprocessing's resource tracker (a Python of its own) attaches
too and leaves a log with no records. `tfdarshan analyze` reads the
session without a traceback, counts every log, and names the shared data
file (the one the workers read), not the configuration file more processes
read; a file one process read is shared with nobody. A zero-byte log
beside them is skipped and named."""
import os
import shutil
import subprocess
import sys

import pytest

import tfdarshan
from tfdarshan.logs.logdir import find_sessions

SCRIPT = """
import multiprocessing as mp, os, sys


def work(i, root):
    with open(os.path.join(root, ".config", "app.json"), "rb") as f:     # every worker's configuration
        f.read()
    with open(os.path.join(root, "shared.bin"), "rb") as f:                # data every worker reads
        f.read()
    with open(os.path.join(root, f"part{i}.bin"), "rb") as f:
        f.read()


if __name__ == "__main__":
    with open(os.path.join(sys.argv[1], ".config", "app.json"), "rb") as f:  # read by the main process too
        f.read()
    workers = [mp.get_context("spawn").Process(target=work, args=(i, sys.argv[1])) for i in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(sum(w.exitcode for w in workers))
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    root = tmp_path_factory.mktemp("spawn")
    data = root / "data"
    (data / ".config").mkdir(parents=True)
    (data / ".config" / "app.json").write_bytes(b'{"lr": 0.1}' * 100)
    (data / "shared.bin").write_bytes(os.urandom(50_000))
    for i, n in enumerate(100_000 * (i + 1) for i in range(3)):
        (data / f"part{i}.bin").write_bytes(os.urandom(n))
    (root / "spawn.py").write_text(SCRIPT)
    logdir = root / "logs"
    p = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--children", "--logdir", str(logdir),
                        str(root / "spawn.py"), str(data)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split() == ["0"]
    (s,) = find_sessions(logdir)
    return {"root": root, "data": data, "logdir": logdir, "session": s}


def analyze(directory):
    return subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(directory)], capture_output=True,
                          text=True, timeout=600)


def test_a_process_that_read_nothing_left_a_log_with_no_records(session):
    logs = sorted(session["session"].directory.glob("*.darshan"))
    empty = [log for log in logs if (lambda s: s.posix.empty and s.stdio.empty)(tfdarshan.read_darshan_log(log))]
    assert empty, "the resource tracker's log should hold no records"
    assert len(logs) >= 5          # the script, its 3 workers, the resource tracker


def test_analyze_reads_the_session_without_a_traceback(session):
    logs = list(session["session"].directory.glob("*.darshan"))
    r = analyze(session["logdir"])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr + r.stdout
    assert r.stdout.startswith(f"analyzed {len(logs)} logs")
    # the data file the three workers read, not the configuration four processes read
    line = next(x for x in r.stdout.splitlines() if "shared" in x)
    assert line == f"most shared file: {session['data'] / 'shared.bin'} (3 of {len(logs)} processes)"


def test_an_empty_log_is_skipped_and_named(session, tmp_path):
    copy = tmp_path / "session"
    shutil.copytree(session["session"].directory, copy, ignore=shutil.ignore_patterns("analysis"))
    (copy / "vm_4242.darshan").write_bytes(b"")
    r = analyze(copy)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Traceback" not in r.stderr + r.stdout
    assert "skipped 1 unreadable log: vm_4242.darshan (empty file, not a Darshan log)" in r.stderr


def test_a_file_one_process_read_is_shared_with_nobody(session, tmp_path):
    # the same session without the shared file's readers' records of it: each part file has one reader
    from tfdarshan.analysis.analyze import read_table
    from tfdarshan.cli.analyze import most_shared_line
    files = read_table(session["session"].directory, "files")
    one = files[~files["path"].str.endswith("shared.bin")]
    assert (one[one["path"].str.contains("/part")]["ranks"] == 1).all()
    assert most_shared_line(one, 5, "processes") == \
        "shared files: none (no data file was read or written by more than one of the 5 processes)"
