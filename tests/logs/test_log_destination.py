"""`tfdarshan run` never loses a profile and never holds a job back on its
account: a log directory that cannot take the logs is refused before the
script starts (exit 2, one line); when writing fails at the end anyway (a
full disk, the directory replaced under the run), the logs go to a fallback
directory named in one line, and the program's exit status is its own."""
import contextlib
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import tfdarshan

# writes a marker first thing: the marker proves whether the script ran
SCRIPT = """
import os, pathlib, shutil, sys
pathlib.Path(sys.argv[1]).write_text("ran")
data, how, target, code = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
with open(data, "rb") as f:
    f.read()
if how == "fill":               # the log directory's disk fills up under the run
    try:
        with open(os.path.join(target, "filler"), "wb") as f:
            while True:
                f.write(b"x" * 65536)
                f.flush()
    except OSError:
        pass
elif how == "replace":          # the log directory is removed, a file takes its place
    shutil.rmtree(target)
    pathlib.Path(target).write_text("not a directory")
sys.exit(code)
"""


def run(tmp_path, logdir, how="none", target="", code=0, env=None):
    script = tmp_path / "job.py"
    script.write_text(SCRIPT)
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(123_457))
    marker = tmp_path / "ran"
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(script),
                        str(marker), str(data), how, str(target), str(code)],
                       capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})
    return r, marker, data


def is_root():
    return os.geteuid() == 0


@contextlib.contextmanager
def tmpfs(where: pathlib.Path, options: str):
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_log_directory_that_cannot_be_created_stops_the_run_before_the_script(tmp_path):
    r, marker, _ = run(tmp_path, "/proc/nope")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "/proc/nope" in r.stderr and "not started" in r.stderr
    assert not marker.exists()
    # a file where a directory must go: the same
    blocker = tmp_path / "logs"
    blocker.mkdir()
    (blocker / "plugins").write_text("a file, not a directory")
    r, marker, _ = run(tmp_path, blocker)
    assert r.returncode == 2 and not marker.exists(), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_an_unwritable_log_directory_stops_the_run_before_the_script(tmp_path):
    if is_root():
        # root writes through mode bits: a read-only file system says no to root too
        with tmpfs(tmp_path / "ro", "ro,size=1m") as ro:
            r, marker, _ = run(tmp_path, ro / "logs")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        r, marker, _ = run(tmp_path, locked / "logs")
        locked.chmod(0o700)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "not started" in r.stderr
    assert not marker.exists()


@pytest.mark.parametrize("how,code", [("fill", 0), ("fill", 3), ("replace", 0), ("replace", 5)])
def test_logs_that_cannot_be_written_at_the_end_go_to_the_fallback(tmp_path, how, code):
    cache = tmp_path / "cache"
    env = {"XDG_CACHE_HOME": str(cache)}
    with contextlib.ExitStack() as stack:
        if how == "fill":
            if not is_root():
                pytest.skip("mounting a tiny tmpfs to fill needs root")
            base = stack.enter_context(tmpfs(tmp_path / "small", "size=512k"))
            logdir, target = base / "logs", base
        else:
            logdir = tmp_path / "logs"
            target = logdir
        r, marker, data = run(tmp_path, logdir, how, target, code, env)
    assert marker.exists()
    # the program's own exit status, whatever happened to the logs
    assert r.returncode == code, r.stderr
    lines = [line for line in r.stderr.splitlines() if "wrote the logs to" in line]
    assert len(lines) == 1, r.stderr
    fallback = pathlib.Path(re.search(r"wrote the logs to (\S+) instead", lines[0]).group(1))
    # the default fallback: under the cache directory, one directory per run
    assert fallback.parent == cache / "tfdarshan" / "unsaved"
    (log,) = fallback.glob("*.darshan")
    posix = tfdarshan.read_darshan_log(log).posix.set_index("path")
    assert posix.at[str(data), "POSIX_BYTES_READ"] == data.stat().st_size
    assert {p.name[len(log.stem):] for p in fallback.iterdir()} >= {".darshan", ".steps.parquet",
                                                                    ".step_files.parquet"}
    shutil.rmtree(cache)
