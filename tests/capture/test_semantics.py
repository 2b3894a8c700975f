"""The shim changes no call's outcome: every wrapped function returns the same
value, leaves the same errno and reads the same data with and without it.

tests/native/semops.c makes one libc call per operation from a library of
its own, so the calls go through the GOT the shim patches. Each test replays
one sequence of operations twice, in two identical fresh directory trees:
first with the shim detached, then attached. The outcomes and the trees left
behind must be equal, and the shim must have recorded the attached run."""
import collections
import ctypes
import errno
import os
import re
import shutil
import stat
import struct
import subprocess
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tfdarshan
from counters import row
from places import NATIVE, ROOT as REPO

pytestmark = pytest.mark.cost(40)

BUFLEN = 16384
SKIPPED = -(2 ** 63)              # semops.c called nothing: the stream slot was empty
MINUS_ONE, UNUSED_FD, ROOT = -1, -2, -3     # fd operands that are not slots
PROBE_FD_SLOT, PROBE_STREAM_SLOT = 7, 3     # kept out of the random sequences

DATA = (bytes(range(251)) * 20)[:5000]      # period 251: a read at a wrong offset shows
TEXT = b"".join(b"line %d\n" % i for i in range(40))
PROBE = b"p" * 300

# operations returning a new descriptor: its number depends on what else the
# process has open, so results are compared by order of first appearance
FD_RESULTS = {"open", "open64", "__open_2", "__open64_2", "openat", "openat64", "__openat_2",
              "__openat64_2", "creat", "creat64", "mkstemp", "mkostemp", "mkstemps", "mkostemps", "dup",
              "dup2", "dup3", "fcntl_dupfd", "fcntl64_dupfd", "fileno"}

# hooks.def entries no operation calls, and why
NOT_CALLED = {
    "newfstatat": "a system call name; glibc exports no such function",
    "dlopen": "loads libraries; no I/O result to compare",
    "dlmopen": "loads libraries; no I/O result to compare",
}

Op = collections.namedtuple("Op", "name slot slot2 a b c path mode data",
                            defaults=(0, 0, 0, 0, 0, None, None, b""))
Op.__doc__ = """One call: slot is the fd/stream slot acted on or receiving a new one,
slot2 the source fd/stream or the directory fd of *at calls; path and mode
are relative paths (mode is fopen's mode or rename's target); data is
written by the write calls."""
# errno by name (errno.errorcode spells EOPNOTSUPP as ENOTSUP)
Outcome = collections.namedtuple("Outcome", "op ret errno stream_state data")


op = Op


# ------------------------------------------------------------------ the library

class Semops:
    """tests/native/semops.c, built and loaded."""

    def __init__(self, so: Path):
        self.path = so
        lib = self.lib = ctypes.CDLL(str(so))
        lib.sem_op_name.restype = lib.sem_op_symbol.restype = ctypes.c_char_p
        lib.sem_begin.argtypes = [ctypes.c_char_p]
        lib.sem_op.restype = ctypes.c_long
        lib.sem_op.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long,
                               ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.c_long, ctypes.POINTER(ctypes.c_long)]
        self.ops, self.symbols = {}, {}
        i = 0
        while (name := lib.sem_op_name(i)) is not None:
            self.ops[name.decode()] = i
            symbol = lib.sem_op_symbol(i)
            self.symbols[name.decode()] = symbol.decode() if symbol else None
            i += 1

    def run(self, root: Path, ops) -> list:
        """Perform ops in directory root; fds in results are numbered by first appearance."""
        fd_ids = {}
        outcomes = []
        assert self.lib.sem_begin(os.fsencode(root)) == 0
        try:
            for o in ops:
                buf = ctypes.create_string_buffer(o.data, BUFLEN)
                out = (ctypes.c_long * 3)()
                ret = self.lib.sem_op(self.ops[o.name], o.slot, o.slot2, o.a, o.b, o.c, encode(o.path),
                                      encode(o.mode), buf, BUFLEN, out)
                if o.name in FD_RESULTS and ret >= 0:
                    ret = ("fd", fd_ids.setdefault(ret, len(fd_ids)))
                outcomes.append(Outcome(o.name, ret, errno.errorcode.get(out[0], out[0]), out[1],
                                        buf.raw[:out[2]]))
        finally:
            assert self.lib.sem_end() == 0
        return outcomes


def encode(text):
    return None if text is None else os.fsencode(text)


@pytest.fixture(scope="session")
def semops(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build tests/native/semops.c")
    out = tmp_path_factory.mktemp("native") / "libsemops.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-pthread", str(NATIVE / "semops.c"),
                    "-o", str(out)], check=True)
    return Semops(out)


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("semantics")


# ------------------------------------------------------------ trees and replays

def make_tree(root: Path):
    root.mkdir()
    (root / "data.bin").write_bytes(DATA)
    (root / "small.txt").write_bytes(TEXT)
    (root / "empty.bin").write_bytes(b"")
    (root / "probe.bin").write_bytes(PROBE)
    (root / "probe.txt").write_bytes(TEXT)
    (root / "sub").mkdir()
    (root / "sub" / "inner.txt").write_bytes(b"inner\n")
    (root / "link").symlink_to("data.bin")


def tree_state(root: Path) -> list:
    """Every entry's name, type, permissions and content (mkstemp's random
    names reduced to their prefix)."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath, name)
            st_ = p.lstat()
            rel = str(p.relative_to(root))
            rel = re.sub(r"tmp\w{6}", "tmp*", rel)
            if stat.S_ISLNK(st_.st_mode):
                content = os.readlink(p)
            elif stat.S_ISREG(st_.st_mode):
                content = p.read_bytes()
            else:
                content = None
            entries.append((rel, stat.S_IFMT(st_.st_mode), stat.S_IMODE(st_.st_mode), content))
    return sorted(entries, key=repr)


PROBE_OPS = [
    op("open", slot=PROBE_FD_SLOT, path="probe.bin", a=os.O_RDONLY),
    op("read", slot=PROBE_FD_SLOT, a=100),
    op("close", slot=PROBE_FD_SLOT),
    op("fopen", slot=PROBE_STREAM_SLOT, path="probe.txt", mode="r"),
    op("fgetc", slot=PROBE_STREAM_SLOT),
    op("fclose", slot=PROBE_STREAM_SLOT),
]


def io_totals() -> dict:
    stats = tfdarshan.stats()       # no totals before the first attach: zeros
    return {k: stats.get(k, 0) for k in ("opens", "reads", "bytes_read")}


PROBE_TOTALS = {"opens": 1, "reads": 1, "bytes_read": 100}     # its POSIX calls, at least


def assert_shim_saw(snap, plain_root: Path, shim_root: Path):
    """The probe's files have exactly the probe's counters, in the attached
    run only."""
    recorded = set(snap.posix["path"]) | set(snap.stdio["path"])
    assert not [p for p in recorded if p.startswith(f"{plain_root}/")], "the detached run was recorded"
    probe = row(snap.posix, shim_root / "probe.bin")
    assert (probe["POSIX_OPENS"], probe["POSIX_READS"], probe["POSIX_BYTES_READ"]) == (1, 1, 100)
    probe = row(snap.stdio, shim_root / "probe.txt")
    assert (probe["STDIO_OPENS"], probe["STDIO_READS"], probe["STDIO_BYTES_READ"]) == (1, 1, 1)


def stage_tree(root: Path) -> Path:
    """Every regular file of root copied under /dev/shm (mirrored, as the
    stager does: same bytes, mode and mtime) and served in its place."""
    from tfdarshan.capture import _native
    top = Path(tempfile.mkdtemp(prefix="tfd-semops-", dir="/dev/shm"))
    sources, copies = [], []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            c = top / str(p).lstrip("/")
            c.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(p, c)
            sources.append(str(p))
            copies.append(str(c))
    st_ = [os.stat(s) for s in sources]
    _native.load_staged(sources, copies, [s.st_size for s in st_], [s.st_mtime_ns for s in st_],
                        [os.stat(c).st_mtime_ns for c in copies])
    return top


def replay(semops: Semops, workdir: Path, ops, check_records=True, served=None) -> list:
    """Run ops without the shim, then with it, in fresh identical trees;
    assert that both runs agree and return the outcomes of ops.

    The attached run must have gone through the wrappers, else the
    comparison proves nothing: the live totals must grow by the probe's
    calls at least, and with check_records the probe's files must have
    their records (a snapshot, slower as records accumulate). With
    `served` (a list), the attached run's tree is staged and served from
    its copies (stage_tree), and the shim's counts of serving are appended."""
    from tfdarshan.capture import _native
    ops = PROBE_OPS + list(ops)
    base = Path(tempfile.mkdtemp(dir=workdir))
    was_attached = tfdarshan.is_attached()
    try:
        plain_root, shim_root = base / "plain", base / "shim"
        make_tree(plain_root)
        make_tree(shim_root)
        if was_attached:
            tfdarshan.detach()
        before = io_totals()
        plain = semops.run(plain_root, ops)
        assert io_totals() == before, "the detached run was recorded"
        copies = stage_tree(shim_root) if served is not None else None
        tfdarshan.attach()
        try:
            shimmed = semops.run(shim_root, ops)
            grown = {k: v - before[k] for k, v in io_totals().items()}
        finally:
            tfdarshan.detach()
            if copies is not None:
                served.append(_native.staged_used())
                _native.load_staged([], [], [], [], [])
                shutil.rmtree(copies, ignore_errors=True)
        assert all(grown[k] >= PROBE_TOTALS[k] for k in grown), f"the shim missed calls: {grown}"
        if check_records:
            # counters since the first attach; both roots are new, so their
            # rows hold these runs' calls alone
            assert_shim_saw(tfdarshan.snapshot(), plain_root, shim_root)
        diffs = [f"#{i} {o}\n   without shim: {p}\n   with shim:    {s}"
                 for i, (o, p, s) in enumerate(zip(ops, plain, shimmed)) if p != s]
        assert not diffs, "outcomes differ:\n" + "\n".join(diffs)
        assert tree_state(shim_root) == tree_state(plain_root), "the runs left different files"
        return shimmed[len(PROBE_OPS):]
    finally:
        if was_attached:
            tfdarshan.attach()
        shutil.rmtree(base, ignore_errors=True)


def not_skipped(outcomes):
    skipped = [o for o in outcomes if o.ret == SKIPPED]
    assert not skipped, f"calls were not made: {skipped}"
    return outcomes


# --------------------------------------------------------- explicit failures

# every call taking an fd, with that fd (or dirfd) in `slot`, the rest valid
def fd_calls(slot):
    data = b"w" * 10
    return [
        *(op(n, slot=slot, a=10) for n in ("read", "__read_chk", "readv")),
        *(op(n, slot=slot, a=10, b=0) for n in ("pread", "pread64", "__pread_chk", "__pread64_chk",
                                                 "preadv", "preadv64", "preadv2", "preadv64v2")),
        op("write", slot=slot, a=10, data=data), op("writev", slot=slot, a=10, data=data),
        *(op(n, slot=slot, a=10, b=0, data=data) for n in ("pwrite", "pwrite64", "pwritev", "pwritev64",
                                                           "pwritev2", "pwritev64v2")),
        op("lseek", slot=slot, a=0, b=os.SEEK_SET), op("lseek64", slot=slot, a=0, b=os.SEEK_CUR),
        op("fsync", slot=slot), op("fdatasync", slot=slot),
        op("mmap", slot=slot, a=4096), op("mmap64", slot=slot, a=4096),
        *(op(n, slot=slot) for n in ("fstat", "fstat64", "__fxstat", "__fxstat64")),
        *(op(n, slot2=slot, path="data.bin") for n in ("fstatat", "fstatat64", "__fxstatat", "__fxstatat64")),
        op("statx", slot2=slot, path="data.bin", b=0x7ff),
        *(op(n, slot=1, slot2=slot, path="data.bin", a=os.O_RDONLY)
          for n in ("openat", "openat64", "__openat_2", "__openat64_2")),
        op("dup", slot=1, slot2=slot), op("dup2", slot=1, slot2=slot), op("dup3", slot=1, slot2=slot),
        op("fcntl_dupfd", slot=1, slot2=slot), op("fcntl64_dupfd", slot=1, slot2=slot),
        op("fcntl_getfl", slot=slot), op("fcntl_setfl", slot=slot, a=os.O_APPEND),
        op("fdopen", slot=0, slot2=slot, mode="r"),
        op("munmap", slot=slot, a=4096, c=-1),
        *(op(n, slot=slot, slot2=slot, a=10, b=-1) for n in ("copy_file_range", "sendfile", "sendfile64",
                                                             "splice")),
        op("close", slot=slot),
    ]


FADVISE = {"posix_fadvise", "posix_fadvise64"}     # return the error number, errno untouched


@pytest.mark.parametrize("kind", ["minus_one", "unused", "just_closed"])
def test_bad_fd(semops, workdir, kind):
    if kind == "just_closed":
        setup = [op("open", slot=0, path="data.bin", a=os.O_RDONLY), op("close", slot=0)]
        slot = 0
    else:
        setup, slot = [], {"minus_one": MINUS_ONE, "unused": UNUSED_FD}[kind]
    calls = fd_calls(slot) + [op(n, slot=slot, a=0, b=0, c=os.POSIX_FADV_NORMAL) for n in FADVISE]
    outcomes = not_skipped(replay(semops, workdir, setup + calls))[len(setup):]
    for o in outcomes:
        if o.op in FADVISE:
            assert o.ret == errno.EBADF, o
        else:
            assert (o.ret, o.errno) == (-1, "EBADF"), o


def pipe_calls(read_slot, write_slot):
    """Reads on an empty pipe, writes to a full one, and the same through STDIO."""
    return [
        op("read", slot=read_slot, a=10), op("__read_chk", slot=read_slot, a=10),
        op("readv", slot=read_slot, a=10),
        op("preadv2", slot=read_slot, a=10, b=-1), op("preadv64v2", slot=read_slot, a=10, b=-1),
        op("write", slot=write_slot, a=1, data=b"x"), op("writev", slot=write_slot, a=3, data=b"xyz"),
        op("pwritev2", slot=write_slot, a=1, b=-1, data=b"x"),
        op("pwritev64v2", slot=write_slot, a=1, b=-1, data=b"x"),
        op("fread", slot=0, a=1, b=10), op("fgetc", slot=1), op("fgets", slot=2, a=100),
        op("fputc", slot=3, a=ord("x")), op("fflush", slot=3),
    ]


def pipes(flags):
    """Two one-page pipes: slots 0/1 empty, slots 2/3 full; streams 0-2 read
    the empty one, stream 3 writes to the full one."""
    return [
        op("pipe", slot=0, slot2=1, a=flags), op("pipe", slot=2, slot2=3, a=flags),
        op("write", slot=3, a=4096, data=b"f" * 4096),
        *(op("fdopen", slot=s, slot2=0, mode="r") for s in range(3)),
        op("fdopen", slot=3, slot2=3, mode="w"),
    ]


def assert_interrupted(outcomes, expected_errno):
    for o in outcomes:
        if o.op == "fputc":
            assert o.ret == ord("x"), o          # buffered: fflush meets the full pipe
            continue
        if o.op == "fread":
            assert o.ret == 0 and o.stream_state & 2, o     # the stream's error flag
        else:
            assert o.ret == -1, o
        assert o.errno == expected_errno, o


@pytest.mark.parametrize("flags, expected_errno", [(0, "EINTR"), (os.O_NONBLOCK, "EAGAIN")],
                         ids=["blocking", "nonblocking"])
def test_empty_and_full_pipes(semops, workdir, flags, expected_errno):
    setup = pipes(flags)
    calls = pipe_calls(0, 3)
    drain = [op("read", slot=2, a=5000)]                # short: the pipe holds 4096
    outcomes = not_skipped(replay(semops, workdir, setup + calls + drain))
    assert outcomes[2].ret == 4096, "filling the pipe"
    assert_interrupted(outcomes[len(setup):-1], expected_errno)
    assert (outcomes[-1].ret, outcomes[-1].data) == (4096, b"f" * 4096)


def test_nowait_read_of_empty_blocking_pipe(semops, workdir):
    calls = [op("pipe", slot=0, slot2=1),
             op("preadv2", slot=0, a=10, b=-1, c=os.RWF_NOWAIT),
             op("preadv64v2", slot=0, a=10, b=-1, c=os.RWF_NOWAIT)]
    for o in not_skipped(replay(semops, workdir, calls))[1:]:
        assert o.ret == -1 and o.errno in ("EAGAIN", "ENOTSUP"), o


def test_short_reads_and_reads_past_eof(semops, workdir):
    size = len(DATA)
    reads = [  # (call, offset it reads at)
        (op("read", slot=0, a=100), 0),
        (op("read", slot=0, a=BUFLEN), 100),                    # short: the rest of the file
        (op("read", slot=0, a=100), size),                      # at EOF
        (op("__read_chk", slot=0, a=100), size),
        (op("pread", slot=0, a=100, b=size - 10), size - 10),
        (op("pread64", slot=0, a=100, b=size), size),
        (op("__pread_chk", slot=0, a=100, b=size + 1), size + 1),
        (op("__pread64_chk", slot=0, a=BUFLEN, b=1), 1),
        (op("preadv", slot=0, a=100, b=size - 7), size - 7),
        (op("preadv64", slot=0, a=100, b=8192), 8192),
        (op("preadv2", slot=0, a=100, b=size - 1), size - 1),
        (op("lseek", slot=0, a=size - 30), None),
        (op("readv", slot=0, a=100), size - 30),
        (op("preadv64v2", slot=0, a=100, b=-1), size),          # the file position, now at EOF
        (op("lseek64", slot=0, a=100, b=os.SEEK_END), None),
        (op("read", slot=0, a=100), size + 100),                # past EOF
    ]
    calls = [op("open", slot=0, path="data.bin", a=os.O_RDONLY)] + [c for c, _ in reads]
    outcomes = not_skipped(replay(semops, workdir, calls))[1:]
    for (call, offset), o in zip(reads, outcomes):
        if offset is None:
            continue
        expected = DATA[offset:offset + call.a]
        assert (o.ret, o.data) == (len(expected), expected), (call, o)


def test_mmap_across_and_past_eof(semops, workdir):
    size = len(DATA)
    calls = [op("open", slot=0, path="data.bin", a=os.O_RDONLY),
             op("mmap", slot=0, a=8192, b=4096),
             op("mmap64", slot=0, a=4096, b=8192),
             op("mmap", slot=0, a=4096, b=1)]                    # unaligned offset
    across, past, unaligned = not_skipped(replay(semops, workdir, calls))[1:]
    assert (across.ret, across.data) == (0, DATA[4096:size])
    assert (past.ret, past.data) == (0, b"")
    assert (unaligned.ret, unaligned.errno) == (-1, "EINVAL")


def test_stdio_short_reads_and_eof(semops, workdir):
    size = len(DATA)
    calls = [
        op("fopen", slot=0, path="data.bin", mode="r"),
        op("fread", slot=0, a=1, b=BUFLEN),                     # short: the whole file, then EOF
        op("fread", slot=0, a=1, b=10),
        op("fgetc", slot=0), op("getc", slot=0), op("_IO_getc", slot=0),
        op("fgets", slot=0, a=100),
        op("fseek", slot=0, a=-10, b=os.SEEK_END),
        op("__fread_chk", slot=0, a=4, b=5),                    # 10 bytes left: 2 items
        op("fseeko", slot=0, a=size + 500),
        op("ftell", slot=0),
        op("fread", slot=0, a=1, b=10),
        op("fopen64", slot=1, path="small.txt", mode="r"),
        op("fgets", slot=1, a=4096),
        op("fgets", slot=1, a=4),                               # short: size - 1 bytes
    ]
    o = not_skipped(replay(semops, workdir, calls))
    assert (o[1].ret, o[1].data, o[1].stream_state) == (size, DATA, 1)
    assert (o[2].ret, o[2].data, o[2].stream_state) == (0, b"", 1)
    assert [x.ret for x in o[3:7]] == [-1, -1, -1, -1]          # EOF / NULL
    assert (o[8].ret, o[8].data) == (2, DATA[-10:-2])
    assert o[10].ret == size + 500
    assert (o[11].ret, o[11].stream_state & 1) == (0, 1)
    first, second = TEXT.split(b"\n")[:2]
    assert o[13].data == first + b"\n" and o[14].data == second[:3]


def test_zero_length_calls(semops, workdir):
    zero = [
        *(op(n, slot=0) for n in ("read", "__read_chk", "readv", "write", "writev")),
        *(op(n, slot=0, b=10) for n in ("pread", "pread64", "__pread_chk", "__pread64_chk", "preadv",
                                        "preadv64", "preadv2", "preadv64v2", "pwrite", "pwrite64",
                                        "pwritev", "pwritev64", "pwritev2", "pwritev64v2")),
    ]
    stdio = [op("fread", slot=0, a=0, b=10), op("fread", slot=0, a=10, b=0),
             op("fwrite", slot=0, a=0, b=5), op("fwrite", slot=0, a=5, b=0)]
    calls = ([op("open", slot=0, path="data.bin", a=os.O_RDWR)] + zero +
             [op("mmap", slot=0, a=0), op("read", slot=MINUS_ONE, a=0)] +
             [op("fopen", slot=0, path="data.bin", mode="r+")] + stdio +
             [op("fgets", slot=0, a=1), op("fflush", slot=0)])
    o = not_skipped(replay(semops, workdir, calls))
    calls_o = o[1:1 + len(zero)]
    assert all((x.ret, x.data) == (0, b"") for x in calls_o), calls_o
    mmap_o, bad_o = o[1 + len(zero):3 + len(zero)]
    assert (mmap_o.ret, mmap_o.errno) == (-1, "EINVAL")
    assert (bad_o.ret, bad_o.errno) == (-1, "EBADF")
    stdio_o = o[4 + len(zero):8 + len(zero)]
    assert [x.ret for x in stdio_o] == [0, 0, 0, 0]
    assert (o[-2].ret, o[-2].data) == (0, b"")                 # fgets of size 1: ""


PATH_FAILURES = [  # (call, errno it must fail with)
    (op("open", path="missing", a=os.O_RDONLY), "ENOENT"),
    (op("open64", path="sub", a=os.O_WRONLY), "EISDIR"),
    (op("__open_2", path="data.bin/x", a=os.O_RDONLY), "ENOTDIR"),
    (op("__open64_2", path="data.bin", a=os.O_RDONLY | os.O_DIRECTORY), "ENOTDIR"),
    (op("openat", slot2=ROOT, path="data.bin", a=os.O_WRONLY | os.O_CREAT | os.O_EXCL, b=0o644), "EEXIST"),
    (op("openat64", slot2=ROOT, path="link", a=os.O_RDONLY | os.O_NOFOLLOW), "ELOOP"),
    (op("__openat_2", slot2=ROOT, path="missing", a=os.O_RDONLY), "ENOENT"),
    (op("__openat64_2", slot2=ROOT, path="sub", a=os.O_RDWR), "EISDIR"),
    (op("creat", path="missing/new", b=0o644), "ENOENT"),
    (op("creat64", path="sub", b=0o644), "EISDIR"),
    (op("mkstemp", path="no-template"), "EINVAL"),
    (op("mkostemp", path="missing/tmpXXXXXX", a=os.O_CLOEXEC), "ENOENT"),
    (op("mkstemps", path="tmpXXXXXX.s", a=0), "EINVAL"),
    (op("mkostemps", path="tmpXXXXXX.s", a=5, b=0), "EINVAL"),
    *((op(n, path="missing"), "ENOENT") for n in ("stat", "lstat", "stat64", "lstat64", "__xstat",
                                                  "__lxstat", "__xstat64", "__lxstat64")),
    *((op(n, slot2=ROOT, path="data.bin/x"), "ENOTDIR") for n in ("fstatat", "fstatat64", "__fxstatat",
                                                                  "__fxstatat64")),
    (op("fstatat", slot2=ROOT, path="data.bin", a=0x1), "EINVAL"),
    (op("statx", slot2=ROOT, path="missing", b=0x7ff), "ENOENT"),
    (op("rename", path="missing", mode="new0"), "ENOENT"),
    (op("rename", path="sub", mode="data.bin"), "ENOTDIR"),
    (op("fopen", slot=0, path="missing", mode="r"), "ENOENT"),
    (op("fopen64", slot=0, path="data.bin", mode="z"), "EINVAL"),
    (op("fopen", slot=0, path="data.bin", mode="wx"), "EEXIST"),
    (op("fdopen", slot=0, slot2=ROOT, mode="w"), "EINVAL"),     # a read-only directory fd
]


def test_open_stat_and_path_failures(semops, workdir):
    o = not_skipped(replay(semops, workdir, [c for c, _ in PATH_FAILURES]))
    for (call, expected), got in zip(PATH_FAILURES, o):
        assert got.ret == -1 and got.errno == expected, (call, got)


def test_failed_freopen_closes_the_stream(semops, workdir):
    calls = [op("fopen", slot=0, path="small.txt", mode="r"),
             op("freopen", slot=0, path="missing", mode="r"),
             op("fgetc", slot=0),                              # nothing left to call it on
             op("fopen", slot=1, path="small.txt", mode="r"),
             op("freopen64", slot=1, path="data.bin", mode="r"),
             op("fgetc", slot=1),
             op("freopen", slot=1, path=None, mode="r+"),       # same file, new mode
             op("fputc", slot=1, a=ord("Z")),
             op("fflush", slot=1)]
    o = replay(semops, workdir, calls)
    assert (o[1].ret, o[1].errno) == (-1, "ENOENT")
    assert o[2].ret == SKIPPED
    assert o[4].ret == 0 and o[5].ret == DATA[0]
    assert o[6].ret == 0 and o[7].ret == ord("Z") and o[8].ret == 0


def test_other_calls_failing(semops, workdir):
    steps = [  # (call, errno it must fail with, or None)
        (op("open", slot=0, path="data.bin", a=os.O_RDONLY), None),
        (op("lseek", slot=0, a=0, b=17), "EINVAL"),
        (op("lseek64", slot=0, a=-10, b=os.SEEK_SET), "EINVAL"),
        (op("lseek", slot=0, a=len(DATA) + 1, b=os.SEEK_DATA), "ENXIO"),
        (op("pread", slot=0, a=10, b=-1), "EINVAL"),
        (op("pwrite", slot=0, a=10, b=0, data=b"x" * 10), "EBADF"),      # opened read-only
        (op("write", slot=0, a=1, data=b"x"), "EBADF"),
        (op("preadv2", slot=0, a=10, b=0, c=0x40000000), "ENOTSUP"),     # unknown RWF_ flag
        (op("dup3", slot=1, slot2=0, a=os.O_NONBLOCK), "EINVAL"),
        (op("mmap", slot=ROOT, a=4096), "ENODEV"),
        (op("read", slot=ROOT, a=10), "EISDIR"),
        (op("pipe", slot=2, slot2=3), None),
        (op("pread", slot=2, a=10, b=0), "ESPIPE"),
        (op("lseek", slot=2, a=0), "ESPIPE"),
        (op("fsync", slot=2), "EINVAL"),
    ]
    o = not_skipped(replay(semops, workdir, [call for call, _ in steps]))
    for (call, want), got in zip(steps, o):
        if want:
            assert got.ret == -1 and got.errno == want, (call, got)
    fadvise = [op("open", slot=0, path="data.bin", a=os.O_RDONLY),
               op("posix_fadvise", slot=0, a=0, b=0, c=99), op("posix_fadvise64", slot=0, a=0, b=-1),
               op("pipe", slot=2, slot2=3), op("posix_fadvise", slot=2)]
    o = not_skipped(replay(semops, workdir, fadvise))
    assert [x.ret for x in o[1:3]] + [o[4].ret] == [errno.EINVAL, errno.EINVAL, errno.ESPIPE]


def test_stat_family_matches_the_tree(semops, workdir):
    calls = [op("open", slot=0, path="data.bin", a=os.O_RDONLY),
             op("stat", path="link"), op("lstat", path="link"), op("stat64", path="sub"),
             op("lstat64", path="small.txt"), op("__xstat", path="link"), op("__lxstat", path="link"),
             op("__xstat64", path="empty.bin"), op("__lxstat64", path="sub"),
             op("fstat", slot=0), op("fstat64", slot=ROOT), op("__fxstat", slot=0), op("__fxstat64", slot=0),
             op("fstatat", slot2=ROOT, path="link", a=0x100),       # AT_SYMLINK_NOFOLLOW
             op("fstatat64", slot2=0, path="", a=0x1000),           # AT_EMPTY_PATH: the fd itself
             op("__fxstatat", slot2=ROOT, path="sub/inner.txt"),
             op("__fxstatat64", slot2=ROOT, path="link"),
             op("statx", slot2=ROOT, path="link", a=0x100, b=0x7ff),
             op("statx", slot2=0, path="", a=0x1000, b=0x200)]      # STATX_SIZE only
    o = not_skipped(replay(semops, workdir, calls))
    # what each call describes: (path, follows symlinks)
    described = [None, ("link", True), ("link", False), ("sub", True), ("small.txt", False), ("link", True),
                 ("link", False), ("empty.bin", True), ("sub", False), ("data.bin", True), (".", True),
                 ("data.bin", True), ("data.bin", True), ("link", False), ("data.bin", True),
                 ("sub/inner.txt", True), ("link", True), ("link", False), ("data.bin", True)]
    reference = Path(tempfile.mkdtemp(dir=workdir)) / "tree"
    make_tree(reference)
    for call, got, what in zip(calls, o, described):
        if what is None:
            continue
        s = os.stat(reference / what[0], follow_symlinks=what[1])
        size = 0 if stat.S_ISDIR(s.st_mode) else s.st_size
        assert got.ret == 0 and stat_fields(got)[:2] == (size, s.st_mode), (call, got)


def stat_fields(outcome):
    """size, mode (type and permissions) and, from statx, the mask"""
    return tuple(v for (v,) in struct.iter_unpack("q", outcome.data))


def test_created_files_get_the_requested_mode(semops, workdir):
    umask = os.umask(0)
    os.umask(umask)
    calls = [op("open", slot=0, path="new0", a=os.O_WRONLY | os.O_CREAT, b=0o640), op("fstat", slot=0),
             op("openat64", slot=1, slot2=ROOT, path="sub", a=os.O_RDWR | os.O_TMPFILE, b=0o604),
             op("fstat", slot=1),
             op("creat64", slot=2, path="new1", b=0o610), op("fstat64", slot=2),
             op("mkostemps", slot=3, path="tmpXXXXXX.s", a=2, b=os.O_APPEND), op("fstat", slot=3)]
    o = not_skipped(replay(semops, workdir, calls))
    for requested, got in zip([0o640, 0o604, 0o610, 0o600], o[1::2]):
        assert stat.S_IMODE(stat_fields(got)[1]) == requested & ~umask, got


# ------------------------------------------------------ random call sequences

# weighted towards what succeeds, so that later calls have something to act on
FD = st.sampled_from([0, 0, 0, 1, 1, 2, 2, 3, 3, MINUS_ONE, UNUSED_FD, ROOT])
DIRFD = st.sampled_from([ROOT] * 4 + [0, 1, MINUS_ONE, UNUSED_FD])
NEW_FD = st.integers(0, 3)
STREAM = st.sampled_from([0, 0, 0, 1])
NAMES = st.sampled_from(["data.bin", "small.txt", "new0"] * 3 + ["empty.bin", "sub", "sub/inner.txt", "link",
                                                                  "missing", "new1", "data.bin/x", ""])
TEMPLATES = st.sampled_from(["tmpXXXXXX", "sub/tmpXXXXXX", "missing/tmpXXXXXX", "data.bin"])
SUFFIXED = st.sampled_from(["tmpXXXXXX.s", "tmpXXXXXX"])
PLAIN_FLAGS = [os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_RDWR | os.O_APPEND, os.O_RDONLY | os.O_DIRECTORY,
               os.O_RDONLY | os.O_NOFOLLOW, os.O_RDONLY | os.O_NONBLOCK, os.O_RDWR | os.O_CLOEXEC,
               os.O_WRONLY | os.O_TRUNC]
OPEN_FLAGS = st.sampled_from(PLAIN_FLAGS + [os.O_RDWR | os.O_CREAT, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                            os.O_WRONLY | os.O_CREAT | os.O_EXCL, os.O_RDWR | os.O_TMPFILE])
FIXED_OPEN_FLAGS = st.sampled_from(PLAIN_FLAGS)      # the fortified opens abort on O_CREAT
PERMS = st.sampled_from([0o644, 0o600, 0o400])
COUNTS = st.sampled_from([0, 1, 7, 100, 4096, 5000, 6000, BUFLEN])
OFFSETS = st.sampled_from([-1, 0, 1, 100, 4095, 4096, 4999, 5000, 5001, 8192])
SEEK_OFFSETS = st.sampled_from([-5000, -1, 0, 1, 100, 4999, 5000, 8192])
WHENCE = st.sampled_from([os.SEEK_SET, os.SEEK_CUR, os.SEEK_END, os.SEEK_DATA, os.SEEK_HOLE, 17])
RWF = st.sampled_from([0, 0, os.RWF_DSYNC, os.RWF_APPEND, os.RWF_HIPRI, 0x40000000])
DATAS = st.sampled_from([b"", b"hello\n", b"\xff" * 10 + b"abc", bytes(range(1, 256)) * 64])
FOPEN_MODES = st.sampled_from(["r", "r+", "w", "w+", "a", "a+", "rb", "re", "wx", "z"])
AT_FLAGS = st.sampled_from([0, 0x100, 0x1000, 0x1])     # AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH, invalid


RANDOM_OPS = set()      # every op name the random sequences can draw


def calls(*names, **fields):
    RANDOM_OPS.update(names)
    return [st.builds(Op, st.just(n), **fields) for n in names]


OPENERS = st.one_of(
    calls("open", "open64", slot=NEW_FD, path=NAMES, a=OPEN_FLAGS, b=PERMS)
    + calls("__open_2", "__open64_2", slot=NEW_FD, path=NAMES, a=FIXED_OPEN_FLAGS)
    + calls("openat", "openat64", slot=NEW_FD, slot2=DIRFD, path=NAMES, a=OPEN_FLAGS, b=PERMS)
    + calls("__openat_2", "__openat64_2", slot=NEW_FD, slot2=DIRFD, path=NAMES, a=FIXED_OPEN_FLAGS)
    + calls("creat", "creat64", slot=NEW_FD, path=NAMES, b=PERMS)
    + calls("mkstemp", slot=NEW_FD, path=TEMPLATES)
    + calls("mkostemp", slot=NEW_FD, path=TEMPLATES, a=st.sampled_from([0, os.O_CLOEXEC, os.O_APPEND]))
    + calls("mkstemps", slot=NEW_FD, path=SUFFIXED, a=st.sampled_from([0, 2, 20]))
    + calls("mkostemps", slot=NEW_FD, path=SUFFIXED, a=st.sampled_from([0, 2]), b=st.just(os.O_APPEND))
    + calls("pipe", slot=NEW_FD, slot2=NEW_FD, a=st.sampled_from([0, os.O_NONBLOCK]))
    + calls("fopen", "fopen64", slot=STREAM, path=NAMES, mode=FOPEN_MODES)
    + calls("fdopen", slot=STREAM, slot2=FD, mode=FOPEN_MODES)
    + calls("freopen", "freopen64", slot=STREAM, path=st.one_of(NAMES, st.none()), mode=FOPEN_MODES)
)

DESCRIPTOR_CALLS = st.one_of(
    calls("close", "fsync", "fdatasync", "fcntl_getfl", "fstat", "fstat64", "__fxstat", "__fxstat64", slot=FD)
    + calls("dup", "dup2", slot=NEW_FD, slot2=FD)
    + calls("dup3", slot=NEW_FD, slot2=FD, a=st.sampled_from([0, os.O_CLOEXEC, os.O_NONBLOCK]))
    + calls("fcntl_dupfd", "fcntl64_dupfd", slot=NEW_FD, slot2=FD, a=st.sampled_from([0, 5, 50]))
    + calls("fcntl_setfl", slot=FD, a=st.sampled_from([0, os.O_APPEND, os.O_NONBLOCK, os.O_APPEND | os.O_NONBLOCK]))
    + calls("fileno", slot=NEW_FD, slot2=STREAM)
    + calls("lseek", "lseek64", slot=FD, a=SEEK_OFFSETS, b=WHENCE)
    + calls("mmap", "mmap64", slot=FD, a=st.sampled_from([0, 1, 4096, 5000, 8192]),
            b=st.sampled_from([0, 1, 4096, 8192]))
    + calls("posix_fadvise", "posix_fadvise64", slot=FD, a=OFFSETS, b=st.sampled_from([0, 100, -1]),
            c=st.sampled_from([0, 1, 2, 3, 4, 5, 99]))
    + calls("munmap", slot=FD, a=st.just(8192), b=st.sampled_from([0, 4096, 1]),
            c=st.sampled_from([-1, -2, 0, 1, 4096]))
)
# kernel-side copies from slot2 to slot (offset b, -1 for the file position; c: flags, 1 is invalid)
COPY_CALLS = (calls("copy_file_range", "splice", slot=FD, slot2=FD, a=COUNTS, b=st.sampled_from([-1, 0, 100, 6000]),
                    c=st.sampled_from([0, 0, 1]))
              + calls("sendfile", "sendfile64", slot=FD, slot2=FD, a=COUNTS, b=st.sampled_from([-1, 0, 100, 6000])))
READ_CALLS = st.one_of(
    calls("read", "__read_chk", "readv", slot=FD, a=COUNTS)
    + calls("pread", "pread64", "__pread_chk", "__pread64_chk", "preadv", "preadv64", slot=FD, a=COUNTS,
            b=OFFSETS)
    + calls("preadv2", "preadv64v2", slot=FD, a=COUNTS, b=OFFSETS, c=RWF)
)
WRITE_CALLS = st.one_of(
    calls("write", "writev", slot=FD, a=COUNTS, data=DATAS)
    + calls("pwrite", "pwrite64", "pwritev", "pwritev64", slot=FD, a=COUNTS, b=OFFSETS, data=DATAS)
    + calls("pwritev2", "pwritev64v2", slot=FD, a=COUNTS, b=OFFSETS, c=RWF, data=DATAS)
)
METADATA_CALLS = st.one_of(
    calls("stat", "lstat", "stat64", "lstat64", "__xstat", "__lxstat", "__xstat64", "__lxstat64", path=NAMES)
    + calls("fstatat", "fstatat64", "__fxstatat", "__fxstatat64", slot2=DIRFD, path=NAMES, a=AT_FLAGS)
    + calls("statx", slot2=DIRFD, path=NAMES, a=AT_FLAGS, b=st.sampled_from([0, 0x201, 0x7ff]))
    + calls("rename", path=NAMES, mode=NAMES)
    + calls("renameat", slot2=DIRFD, path=NAMES, mode=NAMES)
    + calls("unlink", "remove", "canonicalize_file_name", path=NAMES)
    + calls("unlinkat", slot2=DIRFD, path=NAMES, a=st.sampled_from([0, 0, 0x200, 0x1]))      # AT_REMOVEDIR, invalid
    + calls("truncate", "truncate64", path=NAMES, a=st.sampled_from([0, 1, 5000, 10000, -1]))
    + calls("readlink", path=NAMES, a=st.sampled_from([0, 1, 4, 100]))
    + calls("readlinkat", slot2=DIRFD, path=NAMES, a=st.sampled_from([0, 1, 4, 100]))
    + calls("realpath", path=NAMES, a=st.sampled_from([0, 1]))      # into a buffer, or allocated
)
STDIO_CALLS = st.one_of(
    calls("fclose", "ftell", "rewind", "fflush", "fgetc", "getc", "_IO_getc", slot=STREAM)
    + calls("fflush_all")
    + calls("fread", "__fread_chk", slot=STREAM, a=st.sampled_from([0, 1, 3, 100, 4096]),
            b=st.sampled_from([0, 1, 2, 3]))
    + calls("fwrite", slot=STREAM, a=st.sampled_from([0, 1, 3, 100, 4096]), b=st.sampled_from([0, 1, 2, 3]),
            data=DATAS)
    + calls("fseek", "fseeko", "fseeko64", slot=STREAM, a=SEEK_OFFSETS, b=WHENCE)
    + calls("fgets", slot=STREAM, a=st.sampled_from([0, 1, 2, 10, 100, 4096]))
    + calls("fputs", slot=STREAM, data=DATAS)
    + calls("fputc", "putc", "_IO_putc", slot=STREAM, a=st.sampled_from([65, 10, 0, 255, -1, 321]))
    + calls("fprintf", "vfprintf", slot=STREAM, a=st.integers(-10 ** 6, 10 ** 6), data=DATAS)
)
# the groups weighted alike, whatever their number of functions
ANY_CALL = st.one_of(OPENERS, DESCRIPTOR_CALLS, READ_CALLS, READ_CALLS, WRITE_CALLS, METADATA_CALLS,
                     STDIO_CALLS, STDIO_CALLS, st.one_of(COPY_CALLS))

# Each sequence starts with a file open for reading and writing in slot 0, a
# pipe in slots 2 and 3 (for EAGAIN, EINTR, ESPIPE), a stream on a file in
# stream slot 0 and a random open or two, so that most calls act on something.
START = st.tuples(
    st.builds(Op, st.just("open"), slot=st.just(0), path=st.sampled_from(["data.bin", "small.txt", "new0"]),
              a=st.sampled_from([os.O_RDWR | os.O_CREAT, os.O_RDWR | os.O_APPEND | os.O_CREAT]), b=PERMS),
    st.builds(Op, st.just("pipe"), slot=st.just(2), slot2=st.just(3), a=st.sampled_from([0, os.O_NONBLOCK])),
    st.builds(Op, st.just("fopen"), slot=st.just(0), path=st.sampled_from(["data.bin", "small.txt", "new1"]),
              mode=st.sampled_from(["r", "r+", "w+", "a+"])),
    st.lists(OPENERS, min_size=1, max_size=2),
).map(lambda t: list(t[:3]) + t[3])
SEQUENCES = st.tuples(START, st.lists(ANY_CALL, min_size=15, max_size=40)).map(lambda t: t[0] + t[1])


# Pipes alone: reads of empty pipes (EAGAIN, or EINTR when blocking), short
# reads, writes to full ones, EOF and EPIPE once an end is closed, STDIO on top.
PIPE_FD = st.integers(0, 3)
PIPE_COUNTS = st.sampled_from([0, 1, 100, 4096, 5000])
PIPE_CALLS = st.one_of(
    calls("read", "__read_chk", "readv", slot=PIPE_FD, a=PIPE_COUNTS)
    + calls("preadv2", "preadv64v2", slot=PIPE_FD, a=PIPE_COUNTS, b=st.just(-1),
            c=st.sampled_from([0, os.RWF_NOWAIT]))
    + calls("write", "writev", slot=PIPE_FD, a=PIPE_COUNTS, data=DATAS)
    + calls("pwritev2", "pwritev64v2", slot=PIPE_FD, a=PIPE_COUNTS, b=st.just(-1), data=DATAS)
    + calls("fcntl_setfl", slot=PIPE_FD, a=st.sampled_from([0, os.O_NONBLOCK]))
    + calls("close", slot=PIPE_FD)
    + calls("fdopen", slot=STREAM, slot2=PIPE_FD, mode=st.sampled_from(["r", "w"]))
    + calls("fread", slot=STREAM, a=st.just(1), b=st.sampled_from([1, 100, 5000]))
    + calls("fgetc", "fflush", "fclose", slot=STREAM)
    + calls("fgets", slot=STREAM, a=st.sampled_from([2, 100]))
    + calls("fwrite", slot=STREAM, a=st.just(1), b=st.sampled_from([1, 100, 5000]), data=DATAS)
    + calls("fputs", slot=STREAM, data=DATAS)
)
PIPE_SEQUENCES = st.tuples(
    st.builds(Op, st.just("pipe"), slot=st.just(0), slot2=st.just(1), a=st.sampled_from([0, os.O_NONBLOCK])),
    st.builds(Op, st.just("pipe"), slot=st.just(2), slot2=st.just(3), a=st.sampled_from([0, os.O_NONBLOCK])),
    st.lists(PIPE_CALLS, min_size=10, max_size=30)).map(lambda t: [t[0], t[1]] + t[2])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=SEQUENCES)
def test_random_sequences_agree(semops, workdir, ops):
    replay(semops, workdir, ops, check_records=False)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=SEQUENCES)
def test_random_sequences_agree_while_staged_copies_are_served(semops, workdir, ops):
    # every file of the tree is staged: reads, stats, errors and the tree
    # left behind are the same, writes, renames, truncations and removals
    # included (they stop a source's serving, by any of its names)
    replay(semops, workdir, ops, check_records=False, served=[])


def test_staged_copies_serve_in_the_replay(semops, workdir):
    # the staged replay does serve: reads and stats of small.txt from its copy
    served = []
    o = not_skipped(replay(semops, workdir, [op("open", slot=4, path="small.txt", a=os.O_RDONLY),
                                             op("read", slot=4, a=100), op("stat", path="small.txt"),
                                             op("fopen", slot=1, path="sub/inner.txt", mode="r"),
                                             op("fgets", slot=1, a=100)], served=served))
    assert o[1].data == TEXT[:100] and o[4].data == b"inner\n"
    counts = served[0][:, 2:5].sum(axis=0)      # served opens, fopens, stats
    assert list(counts) == [1 + 1, 1 + 1, 1]    # (the probe's open and fopen, served too)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=PIPE_SEQUENCES)
def test_random_pipe_sequences_agree(semops, workdir, ops):
    replay(semops, workdir, ops, check_records=False)


# ------------------------------------------------------------------- coverage

def test_every_hook_is_called_and_randomly_exercised(semops):
    assert RANDOM_OPS == set(semops.ops), "operations the random sequences never draw"
    hooked = set(re.findall(r"^HOOK\((\w+),", (REPO / "native" / "hooks.def").read_text(), re.M))
    called = {sym for sym in semops.symbols.values() if sym}
    assert called <= hooked, f"operations calling unhooked functions: {called - hooked}"
    assert hooked - called == set(NOT_CALLED), "a hooked function no operation calls"
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed: cannot check the compiled calls")
    undefined = subprocess.run([nm, "-D", "--undefined-only", str(semops.path)], capture_output=True,
                               text=True, check=True).stdout
    imported = {line.split()[-1].split("@")[0] for line in undefined.splitlines() if line.strip()}
    # the compiler may rewrite calls (fprintf into fputs...): each must still be imported
    assert called <= imported, f"calls the compiler did not keep: {called - imported}"


# ------------------------------------------------------------ memory streams

def test_memory_streams_keep_errno(tmp_path):
    """A memory stream has no descriptor: looking its record up must not
    set errno (fileno_unlocked() sets EBADF), since a successful fread or
    fwrite leaves errno as it was."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build tests/native/memstream.c")
    so = tmp_path / "libmemstream.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", str(NATIVE / "memstream.c"), "-o", str(so)],
                   check=True)
    lib = ctypes.CDLL(str(so))
    detached = (lib.memstream_fread_errno(), lib.memstream_fwrite_errno())
    was = tfdarshan.is_attached()
    tfdarshan.attach()
    try:
        attached = (lib.memstream_fread_errno(), lib.memstream_fwrite_errno())
    finally:
        if not was:
            tfdarshan.detach()
    assert detached == (0, 0)
    assert attached == detached
