"""`tfdarshan import` and the CLI's handling of mistakes."""
import os
import shutil
import subprocess
import sys

import pytest

import tfdarshan
from tfdarshan.cli import main
from tfdarshan.logs.darshan_log import read_darshan_log, write_darshan_log
from tfdarshan.logs.logdir import find_sessions


def tfdarshan_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tfdarshan", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


@pytest.fixture
def small_log(tmp_path, attached):
    p = tmp_path / "data.bin"
    p.write_bytes(os.urandom(5000))
    with tfdarshan.profile() as prof:
        p.read_bytes()
    return write_darshan_log(prof.snapshot, tmp_path / "run1.darshan")


def test_import_puts_logs_into_a_logdir(small_log, tmp_path):
    logdir = tmp_path / "tb"
    r = tfdarshan_cli("import", str(small_log), "--logdir", str(logdir))
    assert r.returncode == 0, r.stderr
    copies = list(logdir.glob("imported/plugins/tfdarshan/run1/*.darshan"))
    assert len(copies) == 1
    assert copies[0].read_bytes() == small_log.read_bytes()
    assert len(read_darshan_log(copies[0]).posix) == 1


def test_import_refuses_bad_logs_and_copies_nothing(small_log, tmp_path):
    bad = tmp_path / "bad.darshan"
    bad.write_text("not a log")
    logdir = tmp_path / "tb"
    r = tfdarshan_cli("import", str(small_log), str(bad), "--logdir", str(logdir))
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and str(bad) in r.stderr and "Traceback" not in r.stderr
    assert not logdir.exists()


def test_import_of_many_logs_shows_a_line_per_stage_off_a_terminal(small_log, tmp_path):
    from tfdarshan.cli.import_logs import MANY
    logs = []
    for i in range(MANY + 3):
        logs.append(tmp_path / f"rank{i}.darshan")
        shutil.copyfile(small_log, logs[-1])
    r = tfdarshan_cli("import", *map(str, logs), "--logdir", str(tmp_path / "tb"))
    assert r.returncode == 0, r.stderr
    # stderr is a pipe here: one line a stage, each counting the logs; stdout one line a copy
    lines = r.stderr.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["checking logs", "copying logs"], r.stderr
    assert all(line.startswith("tfdarshan import: ") and f"{len(logs)} logs" in line for line in lines)
    assert len(r.stdout.splitlines()) == len(logs)
    assert len(list((tmp_path / "tb").glob("imported/plugins/tfdarshan/*/*.darshan"))) == len(logs)


@pytest.mark.parametrize("args", [[], ["import"], ["import", "x.darshan"], ["nosuchcommand"],
                                  ["demo", "--files", "-3"], ["probe", "/no/such/dir"],
                                  ["probe", ".", "--size", "lots"], ["recommend", "x.darshan"],
                                  ["recommend", "x.darshan", "--fast-tier", "/no/such"],
                                  ["recommend", "--compare", "a", "b"], ["stage", "missing.json"],
                                  ["run", "--steps", "5:2", "x.py"], ["run", "no_such_script.py"]])
def test_cli_argument_mistakes_exit_nonzero_without_traceback(args, tmp_path):
    r = tfdarshan_cli(*args, cwd=tmp_path)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr


LIBDARSHAN = os.environ.get("TFDARSHAN_LIBDARSHAN")


@pytest.mark.skipif(not LIBDARSHAN, reason="needs a site Darshan runtime: set TFDARSHAN_LIBDARSHAN to its "
                                          "libdarshan.so (no registry these machines reach ships one)")
def test_chaining_to_site_darshan(tmp_path):
    code = f"""
import os, tfdarshan
tfdarshan.attach()
with tfdarshan.profile() as p:
    open({str(tmp_path / 'x.bin')!r}, 'wb').write(b'x' * 1000)
print(int(p.snapshot.posix['POSIX_BYTES_WRITTEN'].sum()))
"""
    env = dict(os.environ, DARSHAN_LOGPATH=str(tmp_path), DARSHAN_ENABLE_NONMPI="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.split()[-1]) == 1000
    assert list(tmp_path.glob("*.darshan")), "the site Darshan should have written its own log"


def test_import_gives_logs_of_the_same_name_sessions_of_their_own(small_log, tmp_path):
    # two of our own logs are both called <host>.darshan; importing them once failed
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    shutil.copyfile(small_log, a / "vm.darshan")
    shutil.copyfile(small_log, b / "vm.darshan")
    logdir = tmp_path / "logs"
    assert main(["import", str(a / "vm.darshan"), str(b / "vm.darshan"), "--logdir", str(logdir)]) == 0
    assert main(["import", str(a / "vm.darshan"), "--logdir", str(logdir)]) == 0     # and later ones too
    sessions = find_sessions(logdir)
    assert sorted(s.name for s in sessions) == ["vm", "vm-2", "vm-3"]
    assert all(len(s.hosts) == 1 for s in sessions)
