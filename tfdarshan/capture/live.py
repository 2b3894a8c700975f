"""A process's counters in a memory-mapped file, refreshed at every collect,
so a process that dies without running its exit handlers (SIGKILL, the OOM
killer) leaves its I/O up to its last collect (capture/live_reader.py reads
it back, logs/live_log.py turns it into a Darshan log marked partial).

Layout (little-endian int64 words; one file, fallocated so a full disk is
an error at growth, never a SIGBUS):

    header   page 0: magic, layout, capacity, offsets, the commit word, and
             per area: seq, records, heap bytes, refresh ticks and wall time,
             folded files, trace drops, threads; identity JSON from byte 1024
    slots    per record index: record id, module, path offset and length in
             the heap, and the seq of the refresh that added it
    heap     path bytes, appended
    area 0, area 1   per record index: its row (the shim's totals, then the
             run-long extremes) and its frequency tables (access, stride:
             VALUES_MAX (value, count) pairs each)

Torn writes: a refresh writes only the area the commit word does not name,
then publishes it by storing its seq in the commit word (one aligned 8-byte
store). Slots and heap are append-only and a reader trusts only slots added
at or before the committed seq. A reader that may race a live writer reads
the commit word before and after copying, and retries when it changed. A
refresh writes the records touched since that area was last written (this
interval's and the previous one's): its cost follows what changed.

A process's fcntl lock on the file says it is alive; the kernel drops it
when the process dies, however it dies (seen from another node, whose view
of locks may be its own, a refresh in the last STALE seconds says so too)."""
from __future__ import annotations

import fcntl
import json
import os
import pathlib
import socket
import threading
import time
from typing import Dict, Optional

import numpy as np

from tfdarshan.capture import _native
from tfdarshan.capture.recorder import EXT_FIELDS, RECORDER, W, Interval, Recorder

MAGIC = int.from_bytes(b"TFDLIVE1", "little")
VERSION = 1
HEADER_BYTES = 4096
IDENTITY_AT = 1024
VALUES_MAX = 32                  # per kind, as the shim (and Darshan's runtime) keeps them
SLOT_WORDS = 5                   # record id, module, path offset, path length, seq added
AREA_INFO_AT, AREA_INFO_WORDS = 32, 8
# header words
(H_MAGIC, H_VERSION, H_HEADER, H_CAPACITY, H_HEAP, H_ROW, H_VALUES, H_SLOTS_AT, H_HEAP_AT, H_AREA0,
 H_AREA1, H_AREA_BYTES, H_COMMIT, H_IDENTITY, H_PID, H_ENDED_SIGNAL, H_ENDED_WALL) = range(17)
# area info words
A_SEQ, A_RECORDS, A_HEAP_USED, A_TICKS, A_WALL, A_FOLDED, A_DROPPED, A_THREADS = range(AREA_INFO_WORDS)
ROW_FIELDS = list(_native.ROW_FIELDS) + [f"EXT_{f}" for f in EXT_FIELDS]
SUFFIX = ".live"                 # <stem>.live beside where <stem>.darshan will go
FIRST_CAPACITY = 64               # records: about 220 KB; the file doubles as files come
SMALL = 24                       # frequency rows a refresh writes one by one
STALE = 60.0                     # seconds without a refresh after which another node's writer is gone


def _layout(capacity: int, heap: int) -> Dict[str, int]:
    row = len(ROW_FIELDS)
    slots_at = HEADER_BYTES
    heap_at = slots_at + capacity * SLOT_WORDS * 8
    area0 = -(-(heap_at + heap) // 4096) * 4096
    area_bytes = capacity * (row + 2 * VALUES_MAX * 2) * 8
    return {"slots_at": slots_at, "heap_at": heap_at, "area0": area0, "area1": area0 + area_bytes,
            "area_bytes": area_bytes, "size": area0 + 2 * area_bytes}


class LiveFile:
    """The writer: one per process, a recorder listener while it runs."""

    def __init__(self, path, identity: Dict, recorder: Recorder = RECORDER):
        self.path = pathlib.Path(path)
        self._rec = recorder
        self._identity = dict(identity, row_fields=ROW_FIELDS, values_max=VALUES_MAX, host=socket.gethostname(),
                              pid=os.getpid(), started=time.time())
        self._pid = os.getpid()
        self._fd = -1
        self._map = None
        self._named = np.zeros(0, dtype=bool)       # slot written for this record index
        self._mark = np.zeros(0, dtype=bool)        # scratch: the records of this refresh
        self._stale = np.zeros(0, dtype=np.int64)   # touched by the last refresh: the other area lacks them
        self._seq = 0
        self._records = 0
        self._heap_used = 0
        self.refreshes = 0
        self.seconds = 0.0                           # spent refreshing (thread CPU time)
        self.failed: Optional[str] = None
        with _native.suppressed():
            self._create(self.path, FIRST_CAPACITY, 64 * FIRST_CAPACITY)
        recorder.add_listener(self.refresh)

    # ------------------------------------------------------------ the file
    def _create(self, path: pathlib.Path, capacity: int, heap: int) -> None:
        lay = _layout(capacity, heap)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.new")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, lay["size"])
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)       # alive while held
            import mmap
            m = mmap.mmap(fd, lay["size"], mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        words = np.frombuffer(m, dtype=np.int64)
        ident = json.dumps(self._identity).encode()
        if IDENTITY_AT + len(ident) > HEADER_BYTES:
            ident = json.dumps({k: v for k, v in self._identity.items() if k != "metadata"}).encode()
        m[IDENTITY_AT:IDENTITY_AT + len(ident)] = ident
        words[[H_MAGIC, H_VERSION, H_HEADER, H_CAPACITY, H_HEAP, H_ROW, H_VALUES, H_SLOTS_AT, H_HEAP_AT, H_AREA0,
               H_AREA1, H_AREA_BYTES, H_IDENTITY, H_PID]] = [
            MAGIC, VERSION, HEADER_BYTES, capacity, heap, len(ROW_FIELDS), VALUES_MAX, lay["slots_at"],
            lay["heap_at"], lay["area0"], lay["area1"], lay["area_bytes"], len(ident), os.getpid()]
        old = self._map
        if old is not None:            # growing: everything committed moves over, then the name does
            ow = self._views(old)
            nw = self._views(m)
            n, h = self._records, self._heap_used
            nw["slots"][:n] = ow["slots"][:n]
            nw["heap"][:h] = ow["heap"][:h]
            for a in (0, 1):
                nw["rows"][a][:n] = ow["rows"][a][:n]
                nw["values"][a][:n] = ow["values"][a][:n]
            info = AREA_INFO_AT
            words[info:info + 2 * AREA_INFO_WORDS] = np.frombuffer(old, dtype=np.int64)[info:info + 2 * AREA_INFO_WORDS]
            words[[H_ENDED_SIGNAL, H_ENDED_WALL]] = np.frombuffer(old, dtype=np.int64)[[H_ENDED_SIGNAL, H_ENDED_WALL]]
            words[H_COMMIT] = np.frombuffer(old, dtype=np.int64)[H_COMMIT]
            del ow, nw
        os.replace(tmp, path)
        if old is not None:
            self._v = None
            _unmap(old)
            os.close(self._fd)
        self._map, self._fd = m, fd
        self._v = self._views(m)

    @staticmethod
    def _views(m) -> Dict:
        return views_of(m, np.frombuffer(m, dtype=np.int64))

    def _grow(self, records: int, heap: int) -> None:
        cap, hp = int(self._v["words"][H_CAPACITY]), int(self._v["words"][H_HEAP])
        if records <= cap and heap <= hp:
            return
        while cap < records:
            cap *= 2
        while hp < heap:
            hp *= 2
        with _native.suppressed():
            self._create(self.path, cap, hp)

    # ------------------------------------------------------------- refresh
    def refresh(self, iv: Interval) -> None:
        """The recorder's listener: publish the totals as of this collect."""
        if os.getpid() != self._pid or self._map is None:
            return                      # a forked child: the file is its parent's
        cpu = time.thread_time()
        try:
            self._refresh(iv)
        except Exception as e:          # noqa: BLE001 - never break a collect; say why once
            if self.failed is None:
                self.failed = f"{type(e).__name__}: {e}"
                import sys
                print(f"tfdarshan: the live log {self.path} stopped being refreshed ({self.failed})", file=sys.stderr)
            self._close_map()
        self.seconds += time.thread_time() - cpu
        self.refreshes += 1

    def _refresh(self, iv: Interval) -> None:
        rec = self._rec
        touched = np.unique(np.concatenate([iv.index, iv.values[:, 0]])) if len(iv.values) else iv.index
        seq = self._seq + 1
        if len(touched):
            top = int(touched.max()) + 1
            if top > len(self._named):
                grow = max(top, 2 * len(self._named)) - len(self._named)
                self._named = np.concatenate([self._named, np.zeros(grow, dtype=bool)])
                self._mark = np.concatenate([self._mark, np.zeros(grow, dtype=bool)])
            new = touched[~self._named[touched]]
            paths = [os.fsencode(rec._paths[i] or "") for i in new]
            self._grow(max(top, self._records), self._heap_used + sum(map(len, paths)))
            v = self._v
            if len(new):
                offsets = self._heap_used + np.concatenate([[0], np.cumsum([len(p) for p in paths])[:-1]])
                blob = b"".join(paths)
                v["heap"][self._heap_used:self._heap_used + len(blob)] = np.frombuffer(blob, dtype=np.uint8)
                v["slots"][new] = np.column_stack([rec._ids[new].view(np.int64), rec._modules[new], offsets,
                                                   [len(p) for p in paths], np.full(len(new), seq)])
                self._heap_used += len(blob)
                self._named[new] = True
            self._records = max(self._records, top)
        v = self._v
        a, other = seq % 2, (seq + 1) % 2
        rows, values = v["rows"][a], v["values"][a]
        self._mark[touched] = True
        carry = self._stale[~self._mark[self._stale]]
        self._mark[touched] = False
        if len(carry):
            rows[carry] = v["rows"][other][carry]
            values[carry] = v["values"][other][carry]
        if len(iv.index):
            rows[iv.index, :W] = iv.after
            rows[iv.index, W:] = rec._ext[iv.index]
        if len(iv.values):
            _put_values(values, iv.values)
        words = v["words"]
        info = AREA_INFO_AT + a * AREA_INFO_WORDS
        words[info:info + AREA_INFO_WORDS] = [
            seq, self._records, self._heap_used, iv.now_ticks, np.float64(time.time()).view(np.int64),
            rec._meta["folded_files"], rec._meta["trace_dropped"], rec._meta["threads"]]
        words[H_COMMIT] = seq           # the publication: one aligned store
        self._seq = seq
        self._stale = touched

    # ---------------------------------------------------------------- end
    def mark_ended(self, signum: int) -> None:
        """Say that `signum` told the process to end: a kill then cut short its log, not its work."""
        if os.getpid() == self._pid and self._map is not None:
            self._v["words"][[H_ENDED_WALL, H_ENDED_SIGNAL]] = [np.float64(time.time()).view(np.int64), signum]

    def _close_map(self) -> None:
        if self._map is not None:
            self._rec.remove_listener(self.refresh)
            self._v = None
            _unmap(self._map)
            self._map = None
            os.close(self._fd)

    def close(self, remove: bool = True) -> None:
        """Stop refreshing; remove the file (the process wrote its log)."""
        if os.getpid() != self._pid:
            return
        self._close_map()
        if remove:
            try:
                self.path.unlink()
            except OSError:
                pass


def _unmap(m) -> None:
    try:
        m.close()
    except BufferError:         # a view still lives (a traceback's frame): unmapped when it goes
        pass


def views_of(buf, words: np.ndarray) -> Dict:
    """Arrays over a live file's regions (a writable map, or bytes read)."""
    cap, row = int(words[H_CAPACITY]), int(words[H_ROW])
    vals = 2 * int(words[H_VALUES])
    ints = np.frombuffer(buf, dtype=np.int64)
    def area(at):
        start = int(at) // 8
        r = ints[start:start + cap * row].reshape(cap, row)
        vv = ints[start + cap * row:start + cap * (row + vals * 2)].reshape(cap, vals, 2)
        return r, vv
    a0, a1 = area(words[H_AREA0]), area(words[H_AREA1])
    s0 = int(words[H_SLOTS_AT]) // 8
    return {"words": words, "slots": ints[s0:s0 + cap * SLOT_WORDS].reshape(cap, SLOT_WORDS),
            "heap": np.frombuffer(buf, dtype=np.uint8)[int(words[H_HEAP_AT]):int(words[H_HEAP_AT]) + int(words[H_HEAP])],
            "rows": (a0[0], a1[0]), "values": (a0[1], a1[1])}


def _put_values(values: np.ndarray, rows: np.ndarray) -> None:
    """Each changed record's whole frequency tables (rows of index, kind,
    value, count) into its fixed slots: kind k's entries from k * VALUES_MAX."""
    if len(rows) <= SMALL:             # a few changed tables: plain Python beats a dozen numpy calls
        filled: Dict[tuple, int] = {}
        for index, kind, value, count in rows.tolist():
            if (index, 0) not in filled and (index, 1) not in filled:
                values[index] = 0
            at = filled.get((index, kind), 0)
            if at < VALUES_MAX:
                values[index, kind * VALUES_MAX + at] = (value, count)
            filled[(index, kind)] = at + 1
        return
    key = rows[:, 0] * 2 + rows[:, 1]
    if (key[1:] < key[:-1]).any():         # the shim gives each table in one run; sort only if not
        order = np.argsort(key, kind="stable")
        rows, key = rows[order], key[order]
    values[rows[:, 0]] = 0
    first = np.ones(len(key), dtype=bool)
    np.not_equal(key[1:], key[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    pos = np.arange(len(rows)) - np.repeat(starts, np.diff(np.append(starts, len(rows))))
    keep = pos < VALUES_MAX
    values[rows[keep, 0], rows[keep, 1] * VALUES_MAX + pos[keep]] = rows[keep, 2:4]


def _refreshed_at(head: bytes) -> float:
    """Wall time of the committed refresh named in a header page."""
    words = np.frombuffer(head, dtype=np.int64)
    seq = int(words[H_COMMIT])
    return float(words[AREA_INFO_AT + (seq % 2) * AREA_INFO_WORDS + A_WALL].view(np.float64)) if seq else 0.0


def owner_alive(path) -> bool:
    """Whether the process that writes the file still runs: it holds a lock
    on the file until it dies (where locks do not work: its pid, on its host)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        head = os.pread(fd, HEADER_BYTES, 0).ljust(HEADER_BYTES, b"\0")
        n = int(np.frombuffer(head, dtype=np.int64)[H_IDENTITY])
        try:
            ident = json.loads(head[IDENTITY_AT:IDENTITY_AT + n]) if 0 < n <= HEADER_BYTES - IDENTITY_AT else {}
        except ValueError:
            ident = {}
        here = ident.get("host") == socket.gethostname()
        if here and ident.get("pid") == os.getpid():
            return True                 # our own: a lock test would drop our lock
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            # from another node, a lock may be node-local: a refresh within
            # STALE seconds (the 10 s ticker refreshes) says it still runs
            return not here and time.time() - _refreshed_at(head) < STALE
        except (BlockingIOError, PermissionError):
            return True
        except OSError:
            if not here:
                return True             # cannot tell: leave it alone
            try:
                os.kill(int(ident.get("pid", 0)), 0)
                return True
            except ProcessLookupError:
                return False
            except OSError:
                return True
    finally:
        os.close(fd)


# ------------------------------------------------------- the process's one
_current: Optional[LiveFile] = None
_current_lock = threading.Lock()


def start(path, identity: Dict) -> Optional[LiveFile]:
    """This process's live file at `path` (None when one runs already, or the
    file cannot be made: the run goes on without it, and says so)."""
    global _current
    with _current_lock:
        if _current is not None and _current._pid == os.getpid():
            return None
        clock = RECORDER.clock
        identity = dict(identity, clock={"origin_ticks": clock.origin_ticks, "ticks_per_second": clock.ticks_per_second,
                                         "origin_unix_time": clock.origin_unix_time, "uses_tsc": clock.uses_tsc},
                        record_cap=RECORDER.settings.record_cap if RECORDER.settings else None)
        try:
            _current = LiveFile(path, identity)
        except OSError as e:
            import sys
            print(f"tfdarshan: no live log at {path} ({e.strerror or e}): a killed process will leave nothing",
                  file=sys.stderr)
            return None
        return _current


def current() -> Optional[LiveFile]:
    """The live file this process writes, if any."""
    with _current_lock:
        return _current if _current is not None and _current._pid == os.getpid() else None


def stop(live: Optional[LiveFile], remove: bool = True) -> None:
    """End `live` (the one start() returned), removing its file."""
    global _current
    if live is None:
        return
    with _current_lock:
        live.close(remove=remove)
        if _current is live:
            _current = None
