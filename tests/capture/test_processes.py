"""Processes: fork without exec, fork in a thread, multiprocessing (fork
and spawn), exec of a non-Python program, a child killed with SIGKILL, and
os._exit; and the coverage self-check against /proc/self/io.

Each case runs as a script in a fresh interpreter, so that forks do not
copy pytest, and reports what every
process counted as JSON; the expected counts come from the bytes each
process was told to read."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tfdarshan.logs.logdir import find_sessions

PRELUDE = textwrap.dedent("""
    import json, os, sys, threading
    import tfdarshan
    d = sys.argv[1]

    def read(name):
        with open(os.path.join(d, name), "rb") as f:
            return len(f.read())

    def counted(snap, name):
        p = snap.posix[snap.posix["path"] == os.path.join(d, name)]
        return int(p["POSIX_BYTES_READ"].sum())

    def report(**kw):
        print(json.dumps(kw), flush=True)
""")


def run(tmp_path, body: str, files=None, timeout=180, env=None):
    d = tmp_path / "data"
    d.mkdir(exist_ok=True)
    for name, size in (files or {}).items():
        (d / name).write_bytes(os.urandom(size))
    # a file, not -c: spawned multiprocessing workers re-import the main module
    script = tmp_path / "case.py"
    script.write_text(PRELUDE + textwrap.dedent(body))
    r = subprocess.run([sys.executable, str(script), str(d)], capture_output=True,
                       text=True, timeout=timeout, env=dict(os.environ, **(env or {})))
    lines = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    return r, lines


def test_fork_child_starts_empty_and_parent_is_not_counted_twice(tmp_path):
    r, out = run(tmp_path, """
        tfdarshan.attach()
        read("before.bin")
        pid = os.fork()
        if pid == 0:
            read("child.bin")
            s = tfdarshan.snapshot()
            report(who="child", before=counted(s, "before.bin"), child=counted(s, "child.bin"),
                   parent=counted(s, "parent.bin"))
            os._exit(0)
        read("parent.bin")
        os.waitpid(pid, 0)
        s = tfdarshan.snapshot()
        report(who="parent", before=counted(s, "before.bin"), child=counted(s, "child.bin"),
               parent=counted(s, "parent.bin"))
    """, files={"before.bin": 1000, "child.bin": 2000, "parent.bin": 3000})
    assert r.returncode == 0, r.stderr
    got = {x["who"]: x for x in out}
    assert got["child"] == {"who": "child", "before": 0, "child": 2000, "parent": 0}
    assert got["parent"] == {"who": "parent", "before": 1000, "child": 0, "parent": 3000}


def test_fork_inside_a_thread_while_others_read(tmp_path):
    r, out = run(tmp_path, """
        tfdarshan.attach()
        stop = threading.Event()
        def reader():
            while not stop.is_set():
                read("busy.bin")
        readers = [threading.Thread(target=reader) for _ in range(4)]
        for t in readers: t.start()
        result = {}
        def forker():
            pid = os.fork()
            if pid == 0:
                # only this thread exists in the child; the shim must still work
                n = sum(read("child.bin") for _ in range(10))
                s = tfdarshan.snapshot()
                os._exit(0 if (n, counted(s, "child.bin"), counted(s, "busy.bin")) == (10000, 10000, 0) else 3)
            result["status"] = os.waitpid(pid, 0)[1]
        t = threading.Thread(target=forker); t.start(); t.join()
        stop.set()
        for t in readers: t.join()
        s = tfdarshan.snapshot()
        report(status=result["status"], child_in_parent=counted(s, "child.bin"), busy=counted(s, "busy.bin") > 0)
    """, files={"busy.bin": 4096, "child.bin": 1000})
    assert r.returncode == 0, r.stderr
    assert out == [{"status": 0, "child_in_parent": 0, "busy": True}]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_multiprocessing_workers(tmp_path, method):
    r, out = run(tmp_path, f"""
        import multiprocessing as mp
        def work(name):
            s0 = tfdarshan.snapshot()
            n = read(name)
            s = tfdarshan.snapshot() - s0
            return name, n, counted(s, name), tfdarshan.is_attached()
        if __name__ == "__main__":
            tfdarshan.attach()
            read("parent.bin")
            with mp.get_context("{method}").Pool(2) as pool:
                results = pool.map(work, ["w0.bin", "w1.bin", "w2.bin"])
            s = tfdarshan.snapshot()
            report(results=results, parent=counted(s, "parent.bin"),
                   workers_in_parent=sum(counted(s, f"w{{i}}.bin") for i in range(3)))
    """, files={"parent.bin": 500, "w0.bin": 100, "w1.bin": 200, "w2.bin": 300},
        env={"TFDARSHAN_NO_HOOKS": "1"})
    assert r.returncode == 0, r.stderr
    (res,) = out
    assert res["parent"] == 500 and res["workers_in_parent"] == 0
    for name, n, seen, attached in res["results"]:
        assert n == {"w0.bin": 100, "w1.bin": 200, "w2.bin": 300}[name]
        if method == "fork":
            # forked workers inherit the attachment and count their own reads only
            assert attached and seen == n
        else:
            # a spawned interpreter is not attached unless asked (tfdarshan run --children)
            assert not attached and seen == 0


def test_exec_of_a_non_python_program_and_a_killed_child(tmp_path):
    r, out = run(tmp_path, """
        import signal, subprocess, time
        tfdarshan.attach()
        # exec replaces the image: the shim is gone from it and nothing breaks
        done = subprocess.run(["/bin/cat", os.path.join(d, "cat.bin")], capture_output=True)
        pid = os.fork()
        if pid == 0:
            while True:
                read("child.bin")
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        n = read("after.bin")
        s = tfdarshan.snapshot()
        report(cat=len(done.stdout), cat_rc=done.returncode, killed=os.WIFSIGNALED(status),
               after=counted(s, "after.bin"), n=n, child_in_parent=counted(s, "child.bin"))
    """, files={"cat.bin": 12345, "child.bin": 100, "after.bin": 777})
    assert r.returncode == 0, r.stderr
    assert out == [{"cat": 12345, "cat_rc": 0, "killed": True, "after": 777, "n": 777, "child_in_parent": 0}]


def test_os_exit_writes_the_window_when_asked(tmp_path):
    """`tfdarshan run` writes its logs through os._exit (the user asked for
    exit logs by running under it)."""
    d = tmp_path / "data"
    d.mkdir()
    (d / "f.bin").write_bytes(os.urandom(4321))
    script = tmp_path / "quits.py"
    script.write_text(f"import os\nopen({str(d / 'f.bin')!r}, 'rb').read()\nos._exit(7)\n")
    logdir = tmp_path / "logs"
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "run", "--logdir", str(logdir), str(script)],
                       capture_output=True, text=True, timeout=180)
    assert r.returncode == 7, r.stderr
    (session,) = find_sessions(logdir)
    import tfdarshan
    snap = tfdarshan.read_darshan_log(session.directory / f"{session.hosts[0]}.darshan")
    row = snap.posix[snap.posix["path"] == str(d / "f.bin")]
    assert int(row["POSIX_BYTES_READ"].sum()) == 4321


def test_coverage_names_what_the_shim_could_not_see(tmp_path):
    """Reads through the GOT are seen; reads through a function pointer
    taken with dlsym (ctypes) are not, and the share says so."""
    seen_bytes, unseen_bytes = 8 << 20, 4 << 20
    r, out = run(tmp_path, f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)       # dlsym'd pointers bypass every GOT
        with tfdarshan.profile(logdir=os.path.join(d, "logs")) as p:
            read("seen.bin")
            fd = os.open(os.path.join(d, "unseen.bin"), os.O_RDONLY)
            buf = ctypes.create_string_buffer(1 << 20)
            got = 0
            while True:
                n = libc.read(fd, buf, 1 << 20)
                if n <= 0:
                    break
                got += n
            os.close(fd)
        cov = p.snapshot.meta["coverage"]
        report(share=cov["share"], counted=cov["counted_bytes"], kernel=cov["kernel_bytes"], got=got,
               blind=cov["blind_spots"])
    """, files={"seen.bin": seen_bytes, "unseen.bin": unseen_bytes})
    assert r.returncode == 0, r.stderr
    (res,) = out
    assert res["got"] == unseen_bytes
    assert res["counted"] >= seen_bytes
    # the kernel saw both files (plus a little: /proc reads, imports)
    assert seen_bytes + unseen_bytes <= res["kernel"] <= (seen_bytes + unseen_bytes) * 1.05
    expected = seen_bytes / (seen_bytes + unseen_bytes)
    assert abs(res["share"] - expected) < 0.03, (res["share"], expected)
    assert any("dlsym" in b for b in res["blind"]) and any("mmap" in b for b in res["blind"])
    # written beside the log, where the tab and the reports read it
    (cov_file,) = (tmp_path / "data" / "logs").glob("plugins/tfdarshan/*/*.coverage.json")
    assert abs(json.loads(cov_file.read_text())["share"] - expected) < 0.03
