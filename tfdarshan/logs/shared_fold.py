"""Darshan's shared-file reduction over record arrays: the records of the
files every rank opened are folded, one rank at a time in rank order, into
one record each (rank -1) by darshan-runtime 3.5's rules
(posix_record_reduction_op, stdio_record_reduction_op, the
*_shared_record_variance functions and darshan_variance_reduce).

Every rule is one numpy operation over all the shared files a rank holds,
and the state is one running record per shared file, whatever the number
of ranks. Darshan folds pairwise inside MPI_Reduce; we fold rank by rank,
the ranks so far being the first operand, so where Darshan's comparisons
are strict, ties go to the later rank."""
from __future__ import annotations

import dataclasses
import functools
from typing import List, Tuple

import numpy as np

from tfdarshan.capture import counters as C
from tfdarshan.logs.darshan_format import record_dtype


def _span(names, first: str, last: str) -> List[int]:
    """Indices of the counters from `first` to `last` inclusive, in Darshan's order."""
    names = list(names)
    return list(range(names.index(first), names.index(last) + 1))


def _at(names, *wanted: str) -> List[int]:
    names = list(names)
    return [names.index(w) for w in wanted]


@dataclasses.dataclass(frozen=True)
class Rules:
    """Where each rule applies: indices into a record's integer (c) and
    floating-point (f) counters."""
    clamped: List[int]          # c: sums that become -1 when negative
    sums: List[int]             # c
    first: List[int]            # c: the first rank's value
    maxes: List[int]            # c
    min_start: List[int]        # f: earliest non-zero time
    max_end: List[int]          # f: latest time
    fsums: List[int]            # f
    slowest_call: List[Tuple[int, int]]     # (f time, c its size): the slowest call
    top4: List[Tuple[List[int], List[int]]]  # (c values, c counts): commonest strides, access sizes
    time: List[int]             # f: read, write and meta time (a rank's I/O time)
    nbytes: List[int]           # c: bytes read and written
    fastest: Tuple[int, int, int]   # c rank, c bytes, f time
    slowest: Tuple[int, int, int]
    variance: Tuple[int, int]       # f: of time, of bytes


def runs(columns: List[int]) -> List[slice]:
    """Column indices as slices of consecutive ones (views, not copies)."""
    out: List[slice] = []
    for i in columns:
        if out and out[-1].stop == i:
            out[-1] = slice(out[-1].start, i + 1)
        else:
            out.append(slice(i, i + 1))
    return out


@functools.lru_cache(maxsize=None)
def rules(module: str) -> Rules:
    ints, floats = C.names(module)
    p = module + "_"
    fastest = (*_at(ints, p + "FASTEST_RANK", p + "FASTEST_RANK_BYTES"), *_at(floats, p + "F_FASTEST_RANK_TIME"))
    slowest = (*_at(ints, p + "SLOWEST_RANK", p + "SLOWEST_RANK_BYTES"), *_at(floats, p + "F_SLOWEST_RANK_TIME"))
    common = dict(time=_at(floats, p + "F_READ_TIME", p + "F_WRITE_TIME", p + "F_META_TIME"),
                  nbytes=_at(ints, p + "BYTES_READ", p + "BYTES_WRITTEN"), fastest=fastest, slowest=slowest,
                  variance=tuple(_at(floats, p + "F_VARIANCE_RANK_TIME", p + "F_VARIANCE_RANK_BYTES")))
    if module == "POSIX":
        return Rules(
            clamped=_span(ints, "POSIX_OPENS", "POSIX_RENAME_TARGETS"),
            sums=(_at(ints, "POSIX_BYTES_READ", "POSIX_BYTES_WRITTEN")
                  + _span(ints, "POSIX_CONSEC_READS", "POSIX_MEM_NOT_ALIGNED") + _at(ints, "POSIX_FILE_NOT_ALIGNED")
                  + _span(ints, "POSIX_SIZE_READ_0_100", "POSIX_SIZE_WRITE_1G_PLUS")),
            first=_at(ints, "POSIX_RENAMED_FROM", "POSIX_MODE", "POSIX_MEM_ALIGNMENT", "POSIX_FILE_ALIGNMENT"),
            maxes=_at(ints, "POSIX_MAX_BYTE_READ", "POSIX_MAX_BYTE_WRITTEN"),
            min_start=_span(floats, "POSIX_F_OPEN_START_TIMESTAMP", "POSIX_F_CLOSE_START_TIMESTAMP"),
            max_end=_span(floats, "POSIX_F_OPEN_END_TIMESTAMP", "POSIX_F_CLOSE_END_TIMESTAMP"),
            fsums=_span(floats, "POSIX_F_READ_TIME", "POSIX_F_META_TIME"),
            slowest_call=[(floats.index(f"POSIX_F_MAX_{k}_TIME"), ints.index(f"POSIX_MAX_{k}_TIME_SIZE"))
                          for k in ("READ", "WRITE")],
            top4=[(_span(ints, f"POSIX_{k}1_{k}", f"POSIX_{k}4_{k}"), _span(ints, f"POSIX_{k}1_COUNT", f"POSIX_{k}4_COUNT"))
                  for k in ("STRIDE", "ACCESS")],
            **common)
    return Rules(
        clamped=[], sums=_span(ints, "STDIO_OPENS", "STDIO_BYTES_READ"), first=[],
        maxes=_at(ints, "STDIO_MAX_BYTE_READ", "STDIO_MAX_BYTE_WRITTEN"),
        min_start=_span(floats, "STDIO_F_OPEN_START_TIMESTAMP", "STDIO_F_READ_START_TIMESTAMP"),
        max_end=_span(floats, "STDIO_F_OPEN_END_TIMESTAMP", "STDIO_F_READ_END_TIMESTAMP"),
        fsums=_span(floats, "STDIO_F_META_TIME", "STDIO_F_READ_TIME"), slowest_call=[], top4=[], **common)


def update_common(vals: np.ndarray, cnts: np.ndarray, value: np.ndarray, count: np.ndarray) -> None:
    """DARSHAN_UPDATE_COMMON_VAL_COUNTERS, one (value, count) a row, in
    place: each row keeps its four commonest values by count, then by value,
    descending; a value already kept adds its count; 0 is no value."""
    rows = np.flatnonzero(value != 0)
    v, n, x, k = vals[rows], cnts[rows], value[rows], count[rows]
    match = v == x[:, None]
    r = np.arange(len(rows))
    total = k + np.where(match.any(axis=1), n[r, match.argmax(axis=1)], 0)
    ahead = (n > total[:, None]) | ((n == total[:, None]) & (v > x[:, None]))
    where = np.cumprod(ahead, axis=1).sum(axis=1)       # past the leading run of those that stay ahead
    moves = where < 4
    rows, v, n, x, total, where = rows[moves], v[moves], n[moves], x[moves], total[moves], where[moves]
    slot = np.arange(4)
    before = slot < where[:, None]
    out_v, out_n = np.where(before, v, 0), np.where(before, n, 0)
    r = np.arange(len(rows))
    out_v[r, where], out_n[r, where] = x, total
    # then the others in their order, without the value's old entry, as many as fit
    rest = ~before & (v != x[:, None])
    dest = where[:, None] + np.cumsum(rest, axis=1)
    i, j = np.nonzero(rest & (dest < 4))
    out_v[i, dest[i, j]], out_n[i, dest[i, j]] = v[i, j], n[i, j]
    vals[rows], cnts[rows] = out_v, out_n


def _merge_top4_stepwise(acc_v, acc_c, new_v, new_c) -> Tuple[np.ndarray, np.ndarray]:
    """The STRIDE / ACCESS step as Darshan runs it: collapse the values both
    records hold, then insert the first record's four and the second's into
    an empty set."""
    acc_c, new_v, new_c = acc_c.copy(), new_v.copy(), new_c.copy()
    for j in range(4):
        for k in range(4):
            same = acc_v[:, j] == new_v[:, k]
            acc_c[:, j] += np.where(same, new_c[:, k], 0)
            new_v[:, k] = np.where(same, 0, new_v[:, k])
            new_c[:, k] = np.where(same, 0, new_c[:, k])
    vals, cnts = np.zeros_like(acc_v), np.zeros_like(acc_c)
    for src_v, src_c in ((acc_v, acc_c), (new_v, new_c)):
        for i in range(4):
            update_common(vals, cnts, src_v[:, i], src_c[:, i])
    return vals, cnts


def _distinct(v: np.ndarray) -> np.ndarray:
    """Rows whose non-zero values differ from each other (as Darshan keeps them)."""
    out = np.ones(len(v), dtype=bool)
    for i in range(4):
        for j in range(i + 1, 4):
            out &= (v[:, i] != v[:, j]) | (v[:, i] == 0)
    return out


def _merge_top4_distinct(acc_v, acc_c, new_v, new_c) -> Tuple[np.ndarray, np.ndarray]:
    """The same step for rows whose two sets each hold distinct values: then
    each insertion lands after every entry ahead of it by (count, value) and
    pushes the last out, so the result is the four greatest of both sets by
    (count, value), with four empty slots (0, 0) among them."""
    both = (acc_v[:, :, None] == new_v[:, None, :]) & (acc_v[:, :, None] != 0)
    acc_c = np.where(acc_v == 0, 0, acc_c + (both * new_c[:, None, :]).sum(axis=2))  # 0 is no value: an empty slot
    held = both.any(axis=1)
    # most often a rank's values are among those so far, still in order: nothing moves
    done = (held | (new_v == 0)).all(axis=1)
    done &= ((acc_v == 0) | (acc_c > 0) | ((acc_c == 0) & (acc_v > 0))).all(axis=1)   # all above an empty slot
    for i in range(3):
        done &= (acc_c[:, i] > acc_c[:, i + 1]) | ((acc_c[:, i] == acc_c[:, i + 1]) & (acc_v[:, i] >= acc_v[:, i + 1]))
    if done.all():
        return acc_v.copy(), acc_c
    empty = np.zeros_like(acc_v)
    vals = np.concatenate([acc_v, np.where(held, 0, new_v), empty], axis=1)
    cnts = np.concatenate([acc_c, np.where(held | (new_v == 0), 0, new_c), empty], axis=1)
    best = np.lexsort((vals, cnts), axis=1)[:, :-5:-1]
    return np.take_along_axis(vals, best, axis=1), np.take_along_axis(cnts, best, axis=1)


def merge_top4(acc_v, acc_c, new_v, new_c) -> Tuple[np.ndarray, np.ndarray]:
    """posix_record_reduction_op's STRIDE / ACCESS step, a row per file
    (four values and their counts of the records so far, and of the next)."""
    fast = _distinct(acc_v) & _distinct(new_v)
    if fast.all():
        return _merge_top4_distinct(acc_v, acc_c, new_v, new_c)
    vals, cnts = np.empty_like(acc_v), np.empty_like(acc_c)
    for rows, merge in ((fast, _merge_top4_distinct), (~fast, _merge_top4_stepwise)):
        vals[rows], cnts[rows] = merge(acc_v[rows], acc_c[rows], new_v[rows], new_c[rows])
    return vals, cnts


class SharedFold:
    """The running reduction of one module's shared files (sorted,
    distinct ids): add() each rank's records of them in rank order, then
    records() gives the reduced records."""

    def __init__(self, module: str, ids: np.ndarray):
        self.module, self.rules = module, rules(module)
        self.ids = np.asarray(ids, dtype=np.uint64)
        n = len(self.ids)
        ints, floats = C.names(module)
        self.c = np.zeros((n, len(ints)), dtype=np.int64)
        self.f = np.zeros((n, len(floats)), dtype=np.float64)
        self.held = np.zeros(n, dtype=np.int64)            # ranks folded in, per file
        # darshan_variance_reduce's (n, T, S) of each rank's I/O time and bytes
        self.var = np.zeros((2, 3, n), dtype=np.float64)
        self._by_id = np.arange(n)                          # self.ids[_by_id] is sorted
        self._last: Tuple[np.ndarray, np.ndarray, bool] = (np.zeros(0, dtype=np.uint64), np.zeros(0, int), False)

    def _positions(self, ids: np.ndarray) -> Tuple[np.ndarray, bool]:
        """Where `ids` are kept, and whether that is 0, 1, 2...: ranks often
        list the same files in the same order, so the last answer is kept."""
        last, pos, identity = self._last
        if len(ids) == len(last) and np.array_equal(ids, last):
            return pos, identity
        pos = self._by_id[np.searchsorted(self.ids[self._by_id], ids)]
        identity = len(pos) == len(self.ids) and bool((pos == np.arange(len(pos))).all())
        self._last = (ids.copy(), pos, identity)
        return pos, identity

    def add(self, rank: int, rec: np.ndarray) -> None:
        """Fold one rank's records of shared files (each file at most once)."""
        if not len(rec):
            return
        if len(rec) == len(self.ids) and not self.held.any():
            # the first rank holds every file: keep them in its order, which later ranks often share
            self.ids = rec["id"].copy()
            self._by_id = np.argsort(self.ids, kind="stable")
        pos, identity = self._positions(rec["id"])
        first = self.held[pos] == 0
        if not first.any():
            self._merge(rank, rec, pos, identity)
        else:
            self._start(rank, rec[first], pos[first])
            if not first.all():
                self._merge(rank, rec[~first], pos[~first], False)
        self.held[pos] += 1

    def _io(self, c: np.ndarray, f: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Each record's I/O time (read + write + meta) and bytes moved."""
        R = self.rules
        return f[:, R.time[0]] + f[:, R.time[1]] + f[:, R.time[2]], c[:, R.nbytes[0]] + c[:, R.nbytes[1]]

    def _start(self, rank: int, rec: np.ndarray, pos: np.ndarray) -> None:
        """The first rank's records of these files, as Darshan's reduction of
        one record leaves them: the fastest and slowest rank this one."""
        R = self.rules
        c, f = rec["c"].copy(), rec["f"].copy()
        for cols in runs(R.clamped):
            np.maximum(c[:, cols], -1, out=c[:, cols])        # an invalid count is -1
        for cols in runs(R.min_start):
            f[:, cols] = np.where(f[:, cols] > 0, f[:, cols], 0.0)  # 0 is never
        time, nbytes = self._io(c, f)
        for r_col, b_col, t_col in (R.fastest, R.slowest):
            c[:, r_col], c[:, b_col], f[:, t_col] = rank, nbytes, time
        self.c[pos], self.f[pos] = c, f
        self.var[:, :, pos] = [[np.ones_like(time), time, np.zeros_like(time)],
                               [np.ones_like(time), nbytes.astype(np.float64), np.zeros_like(time)]]

    def _merge(self, rank: int, rec: np.ndarray, pos: np.ndarray, identity: bool) -> None:
        """Fold a later rank's records of these files into theirs so far."""
        R = self.rules
        whole = len(pos) == len(self.ids)
        if whole:       # the rank holds every file: its records in our order, and ours updated in place
            if not identity:
                order = np.empty_like(pos)
                order[pos] = np.arange(len(pos))
                rec = rec[order]
            acc_c, acc_f, var = self.c, self.f, self.var
        else:
            acc_c, acc_f, var = self.c[pos], self.f[pos], self.var[:, :, pos]
        c, f = rec["c"], rec["f"]
        for cols in runs(R.clamped):
            np.maximum(np.add(acc_c[:, cols], c[:, cols], out=acc_c[:, cols]), -1, out=acc_c[:, cols])
        for cols in runs(R.sums):
            acc_c[:, cols] += c[:, cols]
        for cols in runs(R.maxes):
            np.maximum(acc_c[:, cols], c[:, cols], out=acc_c[:, cols])
        for cols in runs(R.min_start):
            v, a = f[:, cols], acc_f[:, cols]
            acc_f[:, cols] = np.where((v > 0) & ((v < a) | (a == 0)), v, a)
        for cols in runs(R.max_end):
            np.maximum(acc_f[:, cols], f[:, cols], out=acc_f[:, cols])
        for cols in runs(R.fsums):
            acc_f[:, cols] += f[:, cols]
        for t, size in R.slowest_call:
            take = f[:, t] >= acc_f[:, t]
            acc_f[take, t], acc_c[take, size] = f[take, t], c[take, size]
        for vcols, ccols in R.top4:
            acc_c[:, vcols], acc_c[:, ccols] = merge_top4(acc_c[:, vcols], acc_c[:, ccols], c[:, vcols], c[:, ccols])
        time, nbytes = self._io(c, f)
        for (r_col, b_col, t_col), better in ((R.fastest, np.less_equal), (R.slowest, np.greater_equal)):
            take = better(time, acc_f[:, t_col])
            acc_c[take, r_col], acc_c[take, b_col], acc_f[take, t_col] = rank, nbytes[take], time[take]
        for which, x in enumerate((time, nbytes.astype(np.float64))):
            n, T, S = var[which]
            d = (1.0 / n) * T - x           # darshan_variance_reduce with one rank's (1, x, 0)
            var[which] = [n + 1.0, T + x, S + (n / (1.0 * (n + 1.0))) * d * d]
        if not whole:
            self.c[pos], self.f[pos], self.var[:, :, pos] = acc_c, acc_f, var

    def records(self, nprocs: int) -> Tuple[np.ndarray, np.ndarray]:
        """(the reduced records of the files all nprocs ranks added, rank -1;
        the ids of those fewer ranks added, which are not shared after all)."""
        done = self.held == nprocs
        out = np.zeros(int(done.sum()), dtype=record_dtype(self.module))
        out["id"], out["rank"], out["c"], out["f"] = self.ids[done], -1, self.c[done], self.f[done]
        for which, col in enumerate(self.rules.variance):
            n, _, S = self.var[which][:, done]
            out["f"][:, col] = S / n
        return out, self.ids[~done & (self.held > 0)]
