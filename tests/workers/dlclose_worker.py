"""Scenarios for tests/capture/test_dlclose.py, each run in a process of its own so
that a crash is a failed test rather than a dead test run.

    python dlclose_worker.py SCENARIO LIBDIR DATADIR

Prints one JSON object: what the scenario measured."""
import ctypes
import _ctypes
import json
import os
import sys
import threading
import time

import tfdarshan

SCENARIO, LIBDIR, DATADIR = sys.argv[1:4]
COUNTERS = ["POSIX_OPENS", "POSIX_READS", "POSIX_BYTES_READ"]


def load(name, mode=ctypes.DEFAULT_MODE):
    lib = ctypes.CDLL(os.path.join(LIBDIR, name), mode=mode)
    lib.cycle_read.argtypes = [ctypes.c_char_p, ctypes.c_long, ctypes.c_long]
    lib.cycle_read.restype = ctypes.c_long
    return lib


def unload(lib):
    _ctypes.dlclose(lib._handle)


def counts(snap, path):
    """The counters of one file in a snapshot (zeros if absent)."""
    p = snap.posix
    sel = p[p["path"] == path]
    return {c: int(sel[c].sum()) for c in COUNTERS}


def mapped(fragment):
    with open("/proc/self/maps") as f:
        return any(fragment in line for line in f)


def data(name, size=4096):
    path = os.path.join(DATADIR, name)
    if not os.path.exists(path):
        with open(path, "wb") as f:
            f.write(os.urandom(size))
    return path


def repro():
    """The issue's reproduction: a patched library unloaded, leaving a hole
    that the next library is too big for."""
    path = data("repro.bin")
    tfdarshan.attach()
    before = tfdarshan.snapshot()
    a = load("libcycle_small.so")
    ctypes.CDLL(os.path.join(LIBDIR, "libpin.so"))      # loaded after it: a's range stays a hole
    got_a = a.cycle_read(path.encode(), 2, 4096)
    unload(a)
    still_mapped = mapped("libcycle_small.so")
    big = load("libcycle_big.so")                        # 8 MiB: cannot fit the hole
    got_big = big.cycle_read(path.encode(), 3, 4096)
    window = tfdarshan.snapshot() - before
    restored = tfdarshan.detach()
    return {"got": [got_a, got_big], "small_still_mapped": still_mapped, "counts": counts(window, path),
            "slots_after_detach": _native_slots(), "detached": restored}


def _native_slots():
    from tfdarshan.capture import _native
    return _native.patched_slots()


def reload():
    """The same library unloaded and loaded again (usually at the same
    address): patched again, counted again."""
    from tfdarshan.capture import _native
    path = data("reload.bin")
    tfdarshan.attach()
    before = tfdarshan.snapshot()
    bases, patched, got = [], [], []
    for _ in range(5):
        lib = load("libcycle_small.so")
        bases.append(ctypes.cast(lib.cycle_read, ctypes.c_void_p).value)
        patched.append(_native.object_is_patched("libcycle_small.so"))
        got.append(lib.cycle_read(path.encode(), 2, 1000))
        unload(lib)
    window = tfdarshan.snapshot() - before
    tfdarshan.detach()
    return {"distinct_addresses": len(set(bases)), "patched": patched, "got": got,
            "counts": counts(window, path)}


def cycles():
    """Threads load, use and unload libraries of four sizes a hundred times
    while other threads read through Python's own GOT; windows bounded by
    joins are exact, a detached window records nothing, and a phase that
    attaches and detaches while all this runs must not crash."""
    libs = ["libcycle_small.so", "libcycle_mid.so", "libcycle_large.so", "libcycle_big.so"]
    n_cyclers, n_readers, cycles_per_thread, reads, size = 3, 2, 34, 3, 4096
    cycler_files = [data(f"cycler{t}.bin") for t in range(n_cyclers)]
    reader_files = [data(f"reader{t}.bin") for t in range(n_readers)]
    errors = []

    def cycler(t, n=cycles_per_thread):
        for i in range(n):
            lib = load(libs[(i + t) % len(libs)])
            if lib.cycle_read(cycler_files[t].encode(), reads, size) != reads * size:
                errors.append(f"cycler {t} read short")
            unload(lib)

    def reader(t):
        fd = os.open(reader_files[t], os.O_RDONLY)
        for _ in range(200):
            if len(os.pread(fd, size, 0)) != size:
                errors.append(f"reader {t} read short")
        os.close(fd)

    def run_all(n=cycles_per_thread):
        threads = [threading.Thread(target=cycler, args=(t, n)) for t in range(n_cyclers)]
        threads += [threading.Thread(target=reader, args=(t,)) for t in range(n_readers)]
        for th in threads:
            th.start()
        return threads

    def phase():
        for th in run_all():
            th.join()

    expect_cycler = {"POSIX_OPENS": cycles_per_thread, "POSIX_READS": cycles_per_thread * reads,
                     "POSIX_BYTES_READ": cycles_per_thread * reads * size}
    expect_reader = {"POSIX_OPENS": 1, "POSIX_READS": 200, "POSIX_BYTES_READ": 200 * size}
    out = {"exact": [], "detached": [], "errors": errors, "expect_cycler": expect_cycler,
           "expect_reader": expect_reader}

    def window_counts(before, after):
        w = after - before
        return [counts(w, f) for f in cycler_files + reader_files]

    for round_ in range(2):
        tfdarshan.attach()
        before = tfdarshan.snapshot()
        phase()
        out["exact"].append(window_counts(before, tfdarshan.snapshot()))
        snap = tfdarshan.snapshot()
        tfdarshan.detach()
        phase()                                       # detached: nothing recorded
        tfdarshan.attach()
        out["detached"].append(window_counts(snap, tfdarshan.snapshot()))
        tfdarshan.detach()
    # attach and detach while the threads load, unload and read (as often
    # as the threads' run allows, at least three times)
    threads = run_all(3 * cycles_per_thread)
    toggles = 0
    while toggles < 3 or any(th.is_alive() for th in threads):
        tfdarshan.attach()
        tfdarshan.detach()
        toggles += 1
    for th in threads:
        th.join()
    out["toggles"] = toggles
    # and afterwards, still exact
    tfdarshan.attach()
    before = tfdarshan.snapshot()
    phase()
    out["exact"].append(window_counts(before, tfdarshan.snapshot()))
    tfdarshan.detach()
    out["slots_after_detach"] = _native_slots()
    return out


def unload_inside():
    """A thread blocks in read() called from a library (a tail call through
    its GOT, so the thread is inside our wrapper and no frame of the library
    is on its stack) while the library is unloaded and the patcher runs."""
    fifo = os.path.join(DATADIR, "inside.fifo")
    os.mkfifo(fifo)
    tfdarshan.attach()
    before = tfdarshan.snapshot()
    lib = ctypes.CDLL(os.path.join(LIBDIR, "libtailread.so"))
    lib.tail_read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    lib.tail_read.restype = ctypes.c_ssize_t
    tail_read = lib.tail_read                       # keeps the code address, not the library
    wfd = os.open(fifo, os.O_RDWR)                   # O_RDWR: no wait for a reader
    rfd = os.open(fifo, os.O_RDONLY)
    buf = ctypes.create_string_buffer(64)
    result = {}
    started = threading.Event()

    def blocked_read():
        result["tid"] = threading.get_native_id()
        started.set()
        result["n"] = tail_read(rfd, buf, 64)

    th = threading.Thread(target=blocked_read)
    th.start()
    started.wait()
    # unload only once the thread sleeps in the read system call: before
    # that, it would jump into the unloaded library, with or without us
    read_nr = {"x86_64": "0", "aarch64": "63"}[os.uname().machine]
    syscall = f"/proc/self/task/{result['tid']}/syscall"
    while open(syscall).read().split()[0] != read_nr:
        time.sleep(0.001)
    unload(lib)
    unmapped = not mapped("libtailread.so")
    big = load("libcycle_big.so")                    # a patch pass after the unload
    big.cycle_read(data("inside.bin").encode(), 1, 100)
    os.write(wfd, b"x" * 48)
    th.join()
    window = tfdarshan.snapshot() - before
    tfdarshan.detach()
    return {"n": result.get("n"), "data": buf.raw[:48] == b"x" * 48, "unmapped": unmapped,
            "counts": counts(window, fifo)}


def deepbind():
    """A library loaded with RTLD_DEEPBIND is patched and counted."""
    path = data("deepbind.bin")
    tfdarshan.attach()
    before = tfdarshan.snapshot()
    lib = load("libcycle_mid.so", mode=os.RTLD_DEEPBIND | os.RTLD_NOW)
    got = lib.cycle_read(path.encode(), 4, 4096)
    window = tfdarshan.snapshot() - before
    unload(lib)
    tfdarshan.detach()
    return {"got": got, "counts": counts(window, path)}


def namespace():
    """A library opened with dlmopen into a new namespace (through a patched
    GOT, so the dlmopen wrapper runs) has its own libc: it is left alone,
    works, and unloads; the base namespace stays patched."""
    from tfdarshan.capture import _native
    path = data("namespace.bin")
    tfdarshan.attach()
    before = tfdarshan.snapshot()
    ns = ctypes.CDLL(os.path.join(LIBDIR, "libnsopen.so"))
    ns.ns_open.restype = ns.ns_sym.restype = ctypes.c_void_p
    ns.ns_open.argtypes = [ctypes.c_char_p]
    ns.ns_sym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ns.ns_close.argtypes = [ctypes.c_void_p]
    results = []
    for _ in range(3):
        h = ns.ns_open(os.path.join(LIBDIR, "libcycle_ns.so").encode())
        if not h:
            return {"error": "dlmopen failed"}
        fn = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_char_p, ctypes.c_long, ctypes.c_long)(
            ns.ns_sym(h, b"cycle_read"))
        results.append({"got": fn(path.encode(), 2, 4096),
                        "patched": _native.object_is_patched("libcycle_ns.so")})
        ns.ns_close(h)
    base = load("libcycle_small.so")                  # the base namespace still works
    got_base = base.cycle_read(path.encode(), 1, 4096)
    window = tfdarshan.snapshot() - before
    tfdarshan.detach()
    return {"results": results, "got_base": got_base, "counts": counts(window, path)}


print(json.dumps(globals()[SCENARIO]()))
