"""The patcher follows objects as they come and go: libraries unloaded
(dlclose), loaded again, loaded over the holes others left, loaded with
RTLD_DEEPBIND or into another namespace, and unloaded while a thread is
inside our wrapper on their behalf. Each scenario runs in its own process
(tests/workers/dlclose_worker.py), so a crash fails the test."""
import json
import os
import subprocess
import sys

import pytest

from places import NATIVE, WORKERS

WORKER = WORKERS / "dlclose_worker.py"
READ = 4096


@pytest.fixture(scope="module")
def libdir(tmp_path_factory):
    out = tmp_path_factory.mktemp("dlclose_libs")

    def cc(src, name, *flags):
        subprocess.run(["gcc", "-O2", "-shared", "-fPIC", *flags, str(NATIVE / src), "-o", str(out / name)],
                       check=True)

    # four sizes: 4 KiB to 8 MiB of static data
    for name, kib in [("small", 4), ("mid", 256), ("large", 2048), ("big", 8192), ("ns", 4)]:
        cc("dlcycle.c", f"libcycle_{name}.so", f"-DPAD_KIB={kib}")
    cc("dlcycle.c", "libpin.so", "-DPAD_KIB=4")
    cc("tailread.S", "libtailread.so")
    cc("nsopen.c", "libnsopen.so", "-ldl")
    return out


def run(scenario, libdir, tmp_path, timeout=300):
    proc = subprocess.run([sys.executable, str(WORKER), scenario, str(libdir), str(tmp_path)],
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "TFDARSHAN_NO_HOOKS": "1"})
    assert proc.returncode == 0, f"{scenario} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_dlopen_after_unload_leaving_a_hole(libdir, tmp_path):
    # the six-line reproduction crashed here in the patch pass
    out = run("repro", libdir, tmp_path)
    assert not out["small_still_mapped"], "the scenario needs the library really unmapped"
    assert out["got"] == [2 * READ, 3 * READ]
    assert out["counts"] == {"POSIX_OPENS": 2, "POSIX_READS": 5, "POSIX_BYTES_READ": 5 * READ}
    assert out["slots_after_detach"] == 0


def test_reloaded_library_is_patched_again(libdir, tmp_path):
    out = run("reload", libdir, tmp_path)
    assert out["patched"] == [True] * 5
    assert out["got"] == [2000] * 5
    assert out["counts"] == {"POSIX_OPENS": 5, "POSIX_READS": 10, "POSIX_BYTES_READ": 10_000}


def test_load_unload_cycles_from_threads_with_attach_and_detach(libdir, tmp_path):
    out = run("cycles", libdir, tmp_path)
    assert out["errors"] == []
    cyclers = 3
    for window in out["exact"]:
        for i, got in enumerate(window):
            assert got == (out["expect_cycler"] if i < cyclers else out["expect_reader"]), (i, window)
    zero = {"POSIX_OPENS": 0, "POSIX_READS": 0, "POSIX_BYTES_READ": 0}
    for window in out["detached"]:
        assert window == [zero] * len(window)
    assert out["slots_after_detach"] == 0


def test_library_unloaded_while_a_thread_is_inside_our_wrapper(libdir, tmp_path):
    out = run("unload_inside", libdir, tmp_path)
    assert out["n"] == 48 and out["data"]
    assert out["unmapped"], "the scenario needs the library really unmapped"
    # the FIFO was opened twice (a writer and a reader); the one read counts
    assert out["counts"] == {"POSIX_OPENS": 2, "POSIX_READS": 1, "POSIX_BYTES_READ": 48}


def test_deepbind_library_is_counted(libdir, tmp_path):
    out = run("deepbind", libdir, tmp_path)
    assert out["got"] == 4 * READ
    assert out["counts"] == {"POSIX_OPENS": 1, "POSIX_READS": 4, "POSIX_BYTES_READ": 4 * READ}


def test_other_namespace_left_alone(libdir, tmp_path):
    out = run("namespace", libdir, tmp_path)
    assert "error" not in out, out
    # it works, with its own libc, which our wrappers must not mix with ours
    assert out["results"] == [{"got": 2 * READ, "patched": False}] * 3
    assert out["got_base"] == READ
    # only the base namespace's call is recorded
    assert out["counts"] == {"POSIX_OPENS": 1, "POSIX_READS": 1, "POSIX_BYTES_READ": READ}
