"""The case studies' slow tier: mount, measure and unmount it.

The file system itself is case_studies/slowfs.c, a C daemon on libfuse3
(built here with the system's compiler the first time it is needed): a
passthrough over a local directory that sleeps a fixed latency in every
metadata call, read and write request and fsync, and caps the read and
write bandwidth. It used to be a Python (fusepy) daemon, which competed
with TensorFlow for the machine's two cores and so slowed the very runs it
was meant to measure; the C daemon only sleeps, and `cpu_seconds` measures
what it does cost.

    python -m case_studies.slowfs ROOT MOUNTPOINT [--meta-latency 0.004]
        [--read-latency 0.0005] [--bandwidth 300M] [--write-latency 0]
        [--write-bandwidth 0] [--fsync-latency 0]
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import pathlib
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).parent
SOURCE = HERE / "slowfs.c"


def parse_rate(text) -> float:
    from tfdarshan.advice.tiers import parse_size
    return float(parse_size(text)) if text not in (None, "", "0", 0) else 0.0


def build() -> str:
    """The daemon's executable, compiled from slowfs.c when it changed."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    exe = HERE / ".build" / f"slowfs-{digest}"
    if exe.exists():
        return str(exe)
    exe.parent.mkdir(exist_ok=True)
    try:
        flags = subprocess.run(["pkg-config", "--cflags", "--libs", "fuse3"], capture_output=True, text=True,
                               check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"libfuse3's development files are missing (make system-deps installs them): {e}")
    tmp = exe.with_suffix(f".{os.getpid()}.tmp")
    r = subprocess.run(["cc", "-O2", "-Wall", "-o", str(tmp), str(SOURCE)] + flags, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"could not build the slow tier:\n{r.stderr[-2000:]}")
    os.replace(tmp, exe)          # atomic: concurrent builders never run a half-written file
    return str(exe)


class Mount(str):
    """The mount point (a str), with the daemon's process id."""
    pid: int = 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process (all its threads) has used."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_seconds() -> float:
    """CPU seconds all processes on the machine have used (/proc/stat)."""
    f = pathlib.Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = (int(x) for x in f[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU used during a block by the slow-tier daemon, and by every process
    other than this one and the daemon (in cores: seconds per second). The
    machine has two cores: another process's busy core halves TensorFlow's."""

    def __init__(self, daemon_pid: int):
        self.pid = daemon_pid

    def __enter__(self):
        self._t, self._d, self._m = time.perf_counter(), cpu_seconds(self.pid), machine_busy_seconds()
        self._s = cpu_seconds(os.getpid())
        return self

    def __exit__(self, *exc):
        wall = max(time.perf_counter() - self._t, 1e-9)
        self.daemon = cpu_seconds(self.pid) - self._d
        mine = cpu_seconds(os.getpid()) - self._s
        self.others_cores = max(machine_busy_seconds() - self._m - mine - self.daemon, 0.0) / wall
        return False


@contextlib.contextmanager
def mounted(root: str, mountpoint: str, *, meta_latency=0.004, read_latency=0.0005, bandwidth="300M",
            write_latency=0.0, write_bandwidth="0", fsync_latency=0.0):
    """Mount the slow tier over `root` at `mountpoint` for the block."""
    os.makedirs(mountpoint, exist_ok=True)
    proc = subprocess.Popen([build(), root, mountpoint, repr(float(meta_latency)), repr(float(read_latency)),
                             repr(parse_rate(bandwidth)), repr(float(write_latency)),
                             repr(parse_rate(write_bandwidth)), repr(float(fsync_latency))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.time() + 30
    while not os.path.ismount(mountpoint):
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            out = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            raise RuntimeError(f"could not mount the slow file system at {mountpoint}: {out[-1000:]}")
        time.sleep(0.05)
    m = Mount(mountpoint)
    m.pid = proc.pid
    try:
        yield m
    finally:
        subprocess.run(["umount", mountpoint], capture_output=True)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            subprocess.run(["umount", "-l", mountpoint], capture_output=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root")
    ap.add_argument("mountpoint")
    ap.add_argument("--meta-latency", type=float, default=0.004)
    ap.add_argument("--read-latency", type=float, default=0.0005)
    ap.add_argument("--bandwidth", default="300M")
    ap.add_argument("--write-latency", type=float, default=0.0)
    ap.add_argument("--write-bandwidth", default="0")
    ap.add_argument("--fsync-latency", type=float, default=0.0)
    a = ap.parse_args(argv)
    return os.execv(build(), [build(), a.root, a.mountpoint, repr(a.meta_latency), repr(a.read_latency),
                              repr(parse_rate(a.bandwidth)), repr(a.write_latency),
                              repr(parse_rate(a.write_bandwidth)), repr(a.fsync_latency)])


if __name__ == "__main__":
    sys.exit(main())
