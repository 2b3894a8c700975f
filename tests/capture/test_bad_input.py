"""Misuse and odd inputs behave sensibly: no crash, no double counting."""
import os
import subprocess
import sys
import textwrap

import tfdarshan
from tfdarshan.capture import _native
from counters import row


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120)


def test_attach_twice_counts_once(tmp_path, attached):
    assert tfdarshan.attach() is False
    p = tmp_path / "once.bin"
    p.write_bytes(b"a" * 1000)
    with tfdarshan.profile() as prof:
        assert p.read_bytes() == b"a" * 1000
    assert row(prof.snapshot.posix, p)["POSIX_BYTES_READ"] == 1000


def test_detach_without_attach_and_snapshot_without_attach():
    r = run_python("""
        import tfdarshan
        assert tfdarshan.detach() is False
        s = tfdarshan.snapshot()
        assert len(s.posix) == 0 and len(s.stdio) == 0
        assert (s - s).posix.empty
        print("ok")
    """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_non_utf8_path(tmp_path, attached):
    name = os.fsencode(str(tmp_path)) + b"/bad-\xff\xfe-name.bin"
    with open(name, "wb") as f:
        f.write(b"z" * 321)
    with tfdarshan.profile() as prof:
        with open(name, "rb") as f:
            assert f.read() == b"z" * 321
    posix = prof.snapshot.posix
    sel = posix[posix["path"].map(os.fsencode) == name]
    assert len(sel) == 1
    r = sel.iloc[0]
    assert r["POSIX_BYTES_READ"] == 321
    assert int(r["record_id"]) == _native.darshan_hash(name)
    # survives a JSON round trip
    import json
    back = tfdarshan.Snapshot.from_dict(json.loads(json.dumps(prof.snapshot.to_dict())))
    assert os.fsencode(back.posix["path"].iloc[list(posix["path"]).index(sel.iloc[0]["path"])]) == name


def test_fd_opened_before_attach_is_attributed(tmp_path):
    p = tmp_path / "inherited.bin"
    p.write_bytes(os.urandom(10_000))
    r = run_python(f"""
        import os, tfdarshan
        fd = os.open({str(p)!r}, os.O_RDONLY)
        os.read(fd, 1000)                    # before attach: not counted
        tfdarshan.attach()
        os.read(fd, 2000)                    # continues at offset 1000
        os.pread(fd, 100, 5000)
        s = tfdarshan.snapshot()
        r = s.posix[s.posix["path"] == {str(p)!r}].iloc[0]
        print(r["POSIX_OPENS"], r["POSIX_READS"], r["POSIX_BYTES_READ"], r["POSIX_MAX_BYTE_READ"],
              r["POSIX_CONSEC_READS"])
    """)
    assert r.returncode == 0, r.stderr
    opens, reads, nbytes, maxbyte, consec = map(int, r.stdout.split())
    # no open was seen; the read continues where the file position was
    assert (opens, reads, nbytes) == (0, 2, 2100)
    assert maxbyte == 5099
    assert consec == 0


def test_errno_and_return_values_unchanged(tmp_path, attached):
    import errno
    for call in (lambda: os.pread(987654, 10, 0), lambda: os.open(tmp_path / "missing", os.O_RDONLY),
                 lambda: os.stat(tmp_path / "missing")):
        try:
            call()
        except OSError as e:
            assert e.errno in (errno.EBADF, errno.ENOENT)
        else:
            raise AssertionError("the call should have failed")
