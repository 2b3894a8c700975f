"""Libraries loaded after attach are intercepted, and dlopen still finds
libraries through the calling library's RUNPATH."""
import ctypes
import os
import subprocess

import tfdarshan
from tfdarshan.capture import _native
from counters import row
from places import NATIVE


def _build(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(NATIVE / "late_b.c"),
                    "-o", str(sub / "libtfdlate_b.so")], check=True)
    # RUNPATH (not RPATH): searched after LD_LIBRARY_PATH, relative to the library itself
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(NATIVE / "late_a.c"), "-o",
                    str(tmp_path / "libtfdlate_a.so"), "-ldl", "-Wl,--enable-new-dtags,-rpath,$ORIGIN/sub"],
                   check=True)
    dyn = subprocess.run(["readelf", "-d", str(tmp_path / "libtfdlate_a.so")], capture_output=True, text=True)
    assert "RUNPATH" in dyn.stdout
    return tmp_path / "libtfdlate_a.so"


def test_library_loaded_after_attach_is_intercepted(tmp_path, attached):
    liba = _build(tmp_path)
    data = tmp_path / "payload.bin"
    data.write_bytes(os.urandom(50_000))
    with tfdarshan.profile() as prof:
        a = ctypes.CDLL(str(liba))           # dlopen through Python's patched GOT
        a.a_read_via_b.argtypes = [ctypes.c_char_p]
        a.a_read_via_b.restype = ctypes.c_long
        got = a.a_read_via_b(str(data).encode())
    assert got == 50_000, "libtfdlate_b.so must be found through libtfdlate_a.so's RUNPATH"
    assert _native.object_is_patched("libtfdlate_a.so")
    assert _native.object_is_patched("libtfdlate_b.so")
    r = row(prof.snapshot.posix, data)
    assert r["POSIX_OPENS"] == 1
    assert r["POSIX_BYTES_READ"] == 50_000
    # reads of 8 KiB until a zero-length read at EOF
    assert r["POSIX_READS"] == -(-50_000 // 8192) + 1


def test_detach_restores_every_slot(tmp_path):
    tfdarshan.attach()
    assert _native.patched_slots() > 0
    assert _native.object_is_patched("libpython")
    tfdarshan.detach()
    assert _native.patched_slots() == 0
    assert not _native.object_is_patched("libpython")
    p = tmp_path / "after.bin"
    before = tfdarshan.snapshot()
    p.write_bytes(b"x" * 100)
    assert p.read_bytes() == b"x" * 100
    window = tfdarshan.snapshot() - before
    assert str(p) not in set(window.posix["path"])
