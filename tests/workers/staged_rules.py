"""A program run under `tfdarshan run --staged` by tests/advice/test_staged.py:
it reads files as any program would, knowing nothing of staged copies, and
writes what it saw (the first byte of each read: C for a copy, S for a
source) as JSON. Each key is one of the test's files; argv: the test's
config (file paths, the C helper) and where to write the report."""
import ctypes
import errno
import json
import os
import subprocess
import sys

cfg = json.load(open(sys.argv[1]))
f = cfg["files"]
seen = {}


def first(path):
    with open(path, "rb", buffering=0) as fh:      # one read(2) of one byte
        return fh.read(1).decode() or ""


# served: Python's open twice, os.open once, stat and lstat
seen["plain"] = [first(f["plain"]), first(f["plain"])]
fd = os.open(f["plain"], os.O_RDONLY)
seen["plain"].append(os.read(fd, 1).decode())
os.close(fd)
st, lst = os.stat(f["plain"]), os.lstat(f["plain"])
seen["plain_stat"] = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_mode, lst.st_ino]
try:
    os.open(f["plain"], os.O_RDONLY | os.O_DIRECTORY)
    seen["plain_as_directory"] = "opened"
except OSError as e:
    seen["plain_as_directory"] = errno.errorcode[e.errno]
try:
    os.stat(f["plain"] + "/inside")
    seen["plain_as_parent"] = "found"
except OSError as e:
    seen["plain_as_parent"] = errno.errorcode[e.errno]

# a C library's calls through its own GOT: open, open64, openat, fopen, fopen64, stat, realpath
c = ctypes.CDLL(cfg["helper"])
c.stat_ino.restype = ctypes.c_long
b = os.fsencode(f["clib"])
seen["clib"] = [chr(c.read_open(b)), chr(c.read_open64(b)), chr(c.read_openat(b)), chr(c.read_fopen(b)),
                chr(c.read_fopen64(b))]
seen["clib_stat_ino"] = c.stat_ino(b)

# what a served descriptor's /proc/self/fd link names: readlink, Python's realpath, C's realpath
fd = os.open(f["fdlink"], os.O_RDONLY)
seen["fd_link"] = os.readlink(f"/proc/self/fd/{fd}")
seen["fd_realpath"] = os.path.realpath(f"/proc/{os.getpid()}/fd/{fd}")
out = ctypes.create_string_buffer(4096)
seen["fd_c_realpath"] = (c.resolve(f"/dev/fd/{fd}".encode(), out), out.value.decode())
os.close(fd)

# writes: an update in place, then a read; a truncating open, then a read
with open(f["written"], "r+b") as fh:
    fh.write(b"X")
seen["written"] = [first(f["written"])]
os.close(os.open(f["truncated"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
seen["truncated"] = [first(f["truncated"])]

# the source changed after staging; the copy is gone; another node's part
seen["changed"] = [first(f["changed"])]
seen["missing"] = [first(f["missing"])]
seen["elsewhere"] = [first(f["elsewhere"])]
if "unreadable" in f:
    seen["unreadable"] = [first(f["unreadable"])]

# a copy that vanishes once it has been served: the next open falls back
seen["vanishing"] = [first(f["vanishing"])]
os.unlink(cfg["copies"]["vanishing"])
seen["vanishing"].append(first(f["vanishing"]))

# relative to the working directory
os.chdir(os.path.dirname(f["relative"]))
seen["relative"] = [first(os.path.basename(f["relative"]))]

# a forked child (it writes its own log when it exits), a Python child and a program
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.write(w, first(f["forked"]).encode())
    os._exit(0)
os.close(w)
seen["forked"] = [os.read(r, 1).decode()]
os.waitpid(pid, 0)
py = subprocess.run([sys.executable, "-c", f"print(open({f['child']!r}, 'rb').read(1).decode())"],
                    capture_output=True, text=True, check=True)
cat = subprocess.run(["head", "-c", "1", f["child"]], capture_output=True, text=True, check=True)
seen["child"] = [py.stdout.strip(), cat.stdout]

json.dump(seen, open(sys.argv[2], "w"))
