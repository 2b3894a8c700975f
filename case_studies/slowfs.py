"""A slow shared file system for the case studies.

A FUSE passthrough over a directory on the local disk that adds a fixed
latency to every metadata operation (lookup, open) and to every read
request, and caps the total read bandwidth, like a busy parallel file
system seen from one node. It is mounted with direct_io, so the kernel
keeps no copy of file data and every epoch pays again.

    python -m case_studies.slowfs ROOT MOUNTPOINT [--meta-latency 0.004]
                                  [--read-latency 0.0005] [--bandwidth 300M]
"""
from __future__ import annotations

import argparse
import contextlib
import errno
import os
import subprocess
import sys
import threading
import time

from fuse import FUSE, FuseOSError, Operations


class SlowFS(Operations):
    def __init__(self, root: str, meta_latency: float, read_latency: float, bandwidth: float):
        self.root = os.path.realpath(root)
        self.meta_latency = meta_latency
        self.read_latency = read_latency
        self.bandwidth = bandwidth
        self._pipe = threading.Lock()
        self._pipe_free = time.monotonic()

    def _path(self, p: str) -> str:
        return os.path.join(self.root, p.lstrip("/"))

    def _wait_for_bandwidth(self, n: int) -> None:
        # one shared pipe: requests queue for their share of it
        with self._pipe:
            now = time.monotonic()
            start = max(now, self._pipe_free)
            self._pipe_free = start + n / self.bandwidth
            done = self._pipe_free
        delay = done - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    # metadata
    def getattr(self, path, fh=None):
        time.sleep(self.meta_latency)
        try:
            st = os.lstat(self._path(path))
        except OSError as e:
            raise FuseOSError(e.errno)
        return {k: getattr(st, k) for k in ("st_atime", "st_ctime", "st_gid", "st_mode", "st_mtime",
                                            "st_nlink", "st_size", "st_uid")}

    def readdir(self, path, fh):
        return [".", ".."] + os.listdir(self._path(path))

    def statfs(self, path):
        s = os.statvfs(self._path(path))
        return {k: getattr(s, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail",
                                           "f_ffree", "f_files", "f_flag", "f_frsize", "f_namemax")}

    # files
    def open(self, path, flags):
        time.sleep(self.meta_latency)
        return os.open(self._path(path), flags)

    def create(self, path, mode, fi=None):
        return os.open(self._path(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)

    def read(self, path, size, offset, fh):
        time.sleep(self.read_latency)
        data = os.pread(fh, size, offset)
        self._wait_for_bandwidth(len(data))
        return data

    def write(self, path, data, offset, fh):
        return os.pwrite(fh, data, offset)

    def truncate(self, path, length, fh=None):
        os.truncate(self._path(path), length)

    def flush(self, path, fh):
        return 0

    def fsync(self, path, datasync, fh):
        os.fsync(fh)
        return 0

    def release(self, path, fh):
        os.close(fh)
        return 0

    def unlink(self, path):
        os.unlink(self._path(path))

    def mkdir(self, path, mode):
        os.mkdir(self._path(path), mode)

    def rmdir(self, path):
        os.rmdir(self._path(path))

    def rename(self, old, new):
        os.rename(self._path(old), self._path(new))

    def chmod(self, path, mode):
        os.chmod(self._path(path), mode)

    def utimens(self, path, times=None):
        os.utime(self._path(path), times)


def parse_rate(text: str) -> float:
    from tfdarshan.advice.tiers import parse_size
    return float(parse_size(text))


@contextlib.contextmanager
def mounted(root: str, mountpoint: str, *, meta_latency=0.004, read_latency=0.0005, bandwidth="300M"):
    """Mount SlowFS in a child process for the duration of the block."""
    os.makedirs(mountpoint, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "case_studies.slowfs", root, mountpoint,
                             "--meta-latency", str(meta_latency), "--read-latency", str(read_latency),
                             "--bandwidth", str(bandwidth)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "TFDARSHAN_NO_HOOKS": "1"})
    deadline = time.time() + 30
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None or time.time() > deadline:
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            proc.kill()
            raise RuntimeError(f"could not mount the slow file system at {mountpoint}: {out[-1000:]}")
        time.sleep(0.1)
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", mountpoint], capture_output=True)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("mountpoint")
    ap.add_argument("--meta-latency", type=float, default=0.004)
    ap.add_argument("--read-latency", type=float, default=0.0005)
    ap.add_argument("--bandwidth", default="300M")
    a = ap.parse_args(argv)
    fs = SlowFS(a.root, a.meta_latency, a.read_latency, parse_rate(a.bandwidth))
    # direct_io: no page cache for file data; attr/entry timeouts 0: every lookup reaches us
    FUSE(fs, a.mountpoint, foreground=True, nothreads=False, direct_io=True, attr_timeout=0,
         entry_timeout=0, negative_timeout=0, max_read=131072)
    return 0


if __name__ == "__main__":
    sys.exit(main())
