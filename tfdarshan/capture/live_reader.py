"""Reading a live log (capture/live.py writes it): the last committed
refresh of a process's counters, whether its writer is dead or alive, with
every header word checked before it is used (a damaged file is refused
with LiveFileError, never read as a region)."""
from __future__ import annotations

import dataclasses
import json
import os
import pathlib
from typing import Dict

import numpy as np

from tfdarshan.capture.live import (A_DROPPED, A_FOLDED, A_RECORDS, A_SEQ, A_THREADS, A_TICKS, A_WALL, AREA_INFO_AT,
                                    AREA_INFO_WORDS, H_AREA0, H_AREA1, H_AREA_BYTES, H_CAPACITY, H_COMMIT,
                                    H_ENDED_SIGNAL, H_ENDED_WALL, H_HEAP, H_HEAP_AT, H_IDENTITY, H_MAGIC, H_ROW,
                                    H_SLOTS_AT, H_VALUES, H_VERSION, HEADER_BYTES, IDENTITY_AT, MAGIC, SLOT_WORDS,
                                    VALUES_MAX, VERSION, views_of)


@dataclasses.dataclass
class LiveState:
    """What a live file held at its last committed refresh."""
    identity: Dict
    seq: int
    index: np.ndarray        # record indexes with a committed slot
    ids: np.ndarray
    modules: np.ndarray
    paths: list
    rows: np.ndarray         # (n, len(identity["row_fields"])): totals, then EXT_ extremes
    values: np.ndarray       # (m, 4): record index, kind, value, count
    refresh_ticks: int
    refresh_wall: float
    counts: Dict[str, int]   # folded_files, trace_dropped, threads
    ended_signal: int = 0    # the signal that told the process to end (0: none came), and when
    ended_wall: float = 0.0


class LiveFileError(ValueError):
    """Not a live file, or one no refresh was committed to."""


def read(path, retries: int = 20) -> LiveState:
    """The last committed refresh of a live file (its writer dead or alive)."""
    path = pathlib.Path(path)
    for _ in range(retries):
        with open(path, "rb") as f:
            data = f.read()
            tail = os.pread(f.fileno(), 8, H_COMMIT * 8)
        if len(data) < HEADER_BYTES:
            raise LiveFileError(f"{path}: too short for a live log")
        words = np.frombuffer(data, dtype=np.int64)
        if words[H_MAGIC] != MAGIC or words[H_VERSION] != VERSION:
            raise LiveFileError(f"{path}: not a tfdarshan live log")
        seq = int(words[H_COMMIT])
        if seq != int.from_bytes(tail, "little"):
            continue                    # a refresh was published while we copied
        if seq == 0:
            raise LiveFileError(f"{path}: no refresh was ever committed")
        if len(data) < int(words[H_AREA1]) + int(words[H_AREA_BYTES]):
            raise LiveFileError(f"{path}: truncated live log")
        try:
            return _state_of(data, words, seq)
        except (ValueError, IndexError, KeyError, TypeError, OverflowError) as e:
            raise LiveFileError(f"{path}: damaged live log ({e})") from None
    raise LiveFileError(f"{path}: its writer kept refreshing while it was read")


def _check_layout(data: bytes, words: np.ndarray, identity: Dict) -> None:
    """The header's geometry against its identity and the file's length: a
    damaged word must not be read as a region (ValueError says which)."""
    cap, row, vals = int(words[H_CAPACITY]), int(words[H_ROW]), int(words[H_VALUES])
    if row != len(identity["row_fields"]) or vals != int(identity["values_max"]) or cap < 0:
        raise ValueError(f"its header does not match its identity (capacity {cap}, row {row}, values {vals})")
    area = cap * (row + 2 * vals * 2) * 8
    regions = {"slots": (int(words[H_SLOTS_AT]), cap * SLOT_WORDS * 8),
               "heap": (int(words[H_HEAP_AT]), int(words[H_HEAP])),
               "area 0": (int(words[H_AREA0]), area), "area 1": (int(words[H_AREA1]), area)}
    for name, (at, size) in regions.items():
        if at < 0 or size < 0 or at % 8 or at + size > len(data):
            raise ValueError(f"its {name} region ({at}, {size} bytes) lies outside the file")


def _state_of(data: bytes, words: np.ndarray, seq: int) -> LiveState:
    """The committed refresh `seq` of a live file's bytes (raises ValueError,
    IndexError or KeyError on damage that the header checks let through)."""
    identity = json.loads(data[IDENTITY_AT:IDENTITY_AT + int(words[H_IDENTITY])])
    _check_layout(data, words, identity)
    v = views_of(data, words)
    info = AREA_INFO_AT + (seq % 2) * AREA_INFO_WORDS
    area = words[info:info + AREA_INFO_WORDS]
    if int(area[A_SEQ]) != seq:
        raise ValueError(f"the committed area is not the one named (seq {seq})")
    n = int(area[A_RECORDS])
    if not 0 <= n <= int(words[H_CAPACITY]):
        raise ValueError(f"{n} records in a file of {int(words[H_CAPACITY])}")
    slots = v["slots"][:n]
    ok = np.flatnonzero((slots[:, 4] > 0) & (slots[:, 4] <= seq))
    heap = v["heap"].tobytes()
    paths = [os.fsdecode(heap[int(o):int(o) + int(ln)]) for o, ln in slots[ok][:, 2:4]]
    vals = v["values"][seq % 2][ok]
    rec, slot = np.nonzero(vals[:, :, 1] > 0)
    values = np.column_stack([ok[rec], slot // VALUES_MAX, vals[rec, slot, 0], vals[rec, slot, 1]])
    return LiveState(identity, seq, ok, slots[ok, 0].view(np.uint64).copy(), slots[ok, 1].copy(), paths,
                     v["rows"][seq % 2][ok].copy(), values.astype(np.int64), int(area[A_TICKS]),
                     float(np.int64(area[A_WALL]).view(np.float64)),
                     {"folded_files": int(area[A_FOLDED]), "trace_dropped": int(area[A_DROPPED]),
                      "threads": int(area[A_THREADS])}, int(words[H_ENDED_SIGNAL]),
                     float(np.int64(words[H_ENDED_WALL]).view(np.float64)))
