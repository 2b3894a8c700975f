"""Where the kernel returns through AMD's Safe RET thunk, the data wrappers
go back to their caller by an indirect jump instead of `ret`
(native/jump_return.h). Both ways must hand back the same values, errno and
data, and count the same: checked in a fresh process for each setting of
TFDARSHAN_DEBUG_RETURN_BY_JUMP, and with it unset (the host's own choice,
predicted here from sysfs); and the compiler must have made every data
wrapper's way back a sibling call, or the jump saves nothing."""
import json
import os
import platform
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRSO = Path("/sys/devices/system/cpu/vulnerabilities/spec_rstack_overflow")

# reads and writes through the interpreter's own calls (os.pread etc.,
# through the GOT the shim patches), successes and failures, reported as
# JSON: returns, errno, data, counts
CHILD = textwrap.dedent(r"""
    import json, os, sys
    import tfdarshan
    from tfdarshan.capture._native import lib
    path = sys.argv[1]
    tfdarshan.attach()
    fd = os.open(path, os.O_RDWR)
    out = []
    def call(name, fn, *args):
        try:
            r = fn(fd, *args)
        except OSError as e:
            out.append([name, -1, e.errno, ""])
            return
        data = r if isinstance(r, bytes) else args[0]
        out.append([name, len(r) if isinstance(r, bytes) else r, 0, data.hex()])
    for i in range(50):
        call("pread", os.pread, 4096, 4096 * (i % 3))
    call("pread", os.pread, 4096, -1)             # EINVAL: not counted
    call("pread", os.pread, 4096, 1 << 20)        # past the end: 0 bytes
    call("read", os.read, 1000)
    call("pwrite", os.pwrite, b"w" * 512, 100)
    call("write", os.write, b"w" * 512)
    call("pwrite", os.pwrite, b"w" * 512, -5)     # EINVAL
    os.close(fd)
    tfdarshan.detach()
    snap = tfdarshan.snapshot()
    rec = snap.posix[snap.posix["path"] == path].iloc[0]
    counts = {k: int(rec[k]) for k in ("POSIX_READS", "POSIX_WRITES", "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN")}
    print(json.dumps({"jump": lib.tfd_returns_by_jump(), "calls": out, "counts": counts}))
""")


def run(tmp_path, knob):
    data = tmp_path / "data.bin"
    data.write_bytes(bytes(range(256)) * 48)       # 12 KiB
    env = dict(os.environ)
    env.pop("TFDARSHAN_DEBUG_RETURN_BY_JUMP", None)
    if knob is not None:
        env["TFDARSHAN_DEBUG_RETURN_BY_JUMP"] = knob
    p = subprocess.run([sys.executable, "-c", CHILD, str(data)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1]), data


def expected(data_bytes):
    """What the calls return, from the test's own model of the file."""
    content = bytearray(data_bytes)
    calls = []
    for i in range(50):
        off = 4096 * (i % 3)
        calls.append(["pread", 4096, 0, bytes(content[off:off + 4096]).hex()])
    calls.append(["pread", -1, 22, ""])
    calls.append(["pread", 0, 0, ""])
    calls.append(["read", 1000, 0, bytes(content[:1000]).hex()])
    calls.append(["pwrite", 512, 0, (b"w" * 512).hex()])
    calls.append(["write", 512, 0, (b"w" * 512).hex()])       # at the file position, 1000
    calls.append(["pwrite", -1, 22, ""])
    counts = {"POSIX_READS": 52, "POSIX_WRITES": 2, "POSIX_BYTES_READ": 50 * 4096 + 1000,
              "POSIX_BYTES_WRITTEN": 1024}
    return calls, counts


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the jump back exists on x86-64 only")
@pytest.mark.parametrize("knob", ["0", "1", None])
def test_both_ways_back_give_the_same_outcomes_and_counts(tmp_path, knob):
    got, data = run(tmp_path, knob)
    original = bytes(range(256)) * 48
    calls, counts = expected(original)
    assert got["calls"] == calls
    assert got["counts"] == counts
    after = bytearray(original)
    after[100:612] = b"w" * 512
    after[1000:1512] = b"w" * 512
    assert data.read_bytes() == bytes(after)
    if knob is not None:
        assert got["jump"] == int(knob)
    else:
        safe_ret = SRSO.exists() and "Safe RET" in SRSO.read_text()
        assert got["jump"] == int(safe_ret)


DATA_WRAPPERS = {"read", "__read_chk", "pread", "pread64", "__pread_chk", "__pread64_chk", "readv", "preadv",
                 "preadv64", "preadv2", "preadv64v2", "write", "pwrite", "pwrite64", "writev", "pwritev",
                 "pwritev64", "pwritev2", "pwritev64v2"}


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the jump back exists on x86-64 only")
def test_every_data_wrapper_reaches_the_jump_by_a_sibling_call():
    """The jump back saves anything only if the compiler made the wrapper's
    last call a jmp (a call would still return r, through the helper's
    plain ret, and save nothing)."""
    import shutil
    import tfdarshan._native_shim as shim_module
    if shutil.which("objdump") is None:
        pytest.skip("objdump (binutils) is needed to read the shim's code")
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", shim_module.__file__], capture_output=True,
                          text=True, check=True).stdout
    if "<tfd_w_pread>:" not in text:
        pytest.skip("the shim's symbols are stripped")
    jumps, calls, function = set(), set(), None
    for line in text.splitlines():
        if line.endswith(">:"):
            function = line.split("<", 1)[1][:-2]
        elif "<tfd_return_by_jump>" in line:
            name = function.removeprefix("tfd_w_") if function else None
            (jumps if "\tjmp " in line else calls if "\tcall " in line else set()).add(name)
    assert jumps == DATA_WRAPPERS
    assert not calls
