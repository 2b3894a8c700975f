"""An independent model of Darshan 3.5's POSIX counters for one file.

Tests feed it the operations they know a program issues (from file sizes
and the documented request pattern) and compare its counters with what the
shim recorded. It follows darshan-runtime/lib/darshan-posix.c's rules as
documented there, written separately from the shim's C code."""
from __future__ import annotations

import collections
from typing import Dict

SIZE_EDGES = [100, 1024, 10 * 1024, 100 * 1024, 1 << 20, 4 << 20, 10 << 20, 100 << 20, 1 << 30]
SIZE_NAMES = ["0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M", "1M_4M", "4M_10M", "10M_100M",
              "100M_1G", "1G_PLUS"]


def size_bin(n: int) -> str:
    """Darshan's histogram bins include their upper edge (0-100 holds 100)."""
    for edge, name in zip(SIZE_EDGES, SIZE_NAMES):
        if n <= edge:
            return name
    return SIZE_NAMES[-1]


class PosixFile:
    def __init__(self, file_alignment: int = 4096, mem_alignment: int = 8):
        self.c: Dict[str, int] = collections.Counter()
        self.offset = 0
        self.last_read = 0       # last byte read (Darshan starts at 0, not -1)
        self.last_written = 0
        self.last_io = None
        self.file_alignment = file_alignment
        self.access = collections.Counter()
        self.stride = collections.Counter()
        self.distinct_access = 0

    def open(self):
        self.c["OPENS"] += 1
        self.offset = self.last_read = self.last_written = 0

    def close(self):
        self.last_read = self.last_written = 0

    def stat(self):
        self.c["STATS"] += 1

    def seek(self, offset: int):
        self.c["SEEKS"] += 1
        self.offset = offset

    def _io(self, kind: str, length: int, offset=None, aligned=True):
        off = self.offset if offset is None else offset
        last = self.last_read if kind == "READ" else self.last_written
        if off > last:
            self.c[f"SEQ_{kind}S"] += 1
        if off == last + 1:
            self.c[f"CONSEC_{kind}S"] += 1
        stride = off - last - 1 if (off > 0 and off > last and last != 0) else 0
        end = off + length - 1
        if kind == "READ":
            self.last_read = end
        else:
            self.last_written = end
        self.offset = off + length
        key = "MAX_BYTE_READ" if kind == "READ" else "MAX_BYTE_WRITTEN"
        self.c[key] = max(self.c[key], end)
        self.c["BYTES_READ" if kind == "READ" else "BYTES_WRITTEN"] += length
        self.c[f"{kind}S"] += 1
        self.c[f"SIZE_{kind}_{size_bin(length)}"] += 1
        for table, v in ((self.access, length), (self.stride, stride)):
            if v in table or len(table) < 32:
                table[v] += 1
        if not aligned:
            self.c["MEM_NOT_ALIGNED"] += 1
        if self.file_alignment > 0 and off % self.file_alignment:
            self.c["FILE_NOT_ALIGNED"] += 1
        if self.last_io is not None and self.last_io != kind:
            self.c["RW_SWITCHES"] += 1
        self.last_io = kind

    def read(self, length: int, offset=None, aligned=True):
        self._io("READ", length, offset, aligned)

    def write(self, length: int, offset=None, aligned=True):
        self._io("WRITE", length, offset, aligned)

    def counters(self) -> Dict[str, int]:
        """POSIX_* counters, with the four commonest non-zero accesses and strides."""
        out = {f"POSIX_{k}": v for k, v in self.c.items()}
        for name, table in (("ACCESS", self.access), ("STRIDE", self.stride)):
            top = sorted(((n, v) for v, n in table.items() if v != 0), key=lambda t: (-t[0], -t[1]))[:4]
            for i in range(4):
                n, v = top[i] if i < len(top) else (0, 0)
                out[f"POSIX_{name}{i + 1}_{name}"] = v
                out[f"POSIX_{name}{i + 1}_COUNT"] = n
        return out
