"""tf.data's own files: what `ds.cache(filename)` and `ds.snapshot(path)`
write and read back. They hold the pipeline's output, not the data it
reads; staging them, or advising a cache to a pipeline that has one, is
wrong. Known by their names:

- cache(filename): a TensorFlow tensor bundle `<filename>.index` and
  `<filename>.data-NNNNN-of-NNNNN`, written as `<filename>_<n>.index` /
  `.data-*` (with `.tempstate<digits>` suffixes while written) and renamed,
  under a `<filename>_<n>.lockfile`;
- snapshot(path): `<path>/<fingerprint>/snapshot.metadata` (written through
  `snapshot.metadata-tmp-<digits>`) and `<run>/<n>.shard/<n>.snapshot`.

A checkpoint is a tensor bundle too (`ckpt-1.index`). A bundle is a cache
when the session holds its family's lock file (the run that wrote the
cache) or when a bundle file of the family was read inside training steps
(a later run reading it: a checkpoint is restored before training, and
written, not read, during it). The rules look at path text, for a
million paths in one pass of Arrow's string kernels."""
from __future__ import annotations

import re
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tfdarshan.capture.arrow_text import arrow_paths

CACHE, SNAPSHOT = "tf.data cache", "tf.data snapshot"
# a bundle's files, their temporary names and the writer's lock: group 1 is the cache's filename
# (DOTALL and \Z: a name may hold a newline)
_BUNDLE = re.compile(r"(.*?)(?:_\d+)?\.(index|data-\d+-of-\d+|lockfile)(?:\.tempstate\d+)?\Z", re.DOTALL)
_SNAPSHOT = r"(^|/)snapshot\.metadata(-tmp-\d+)?$|/\d+\.shard/\d+\.snapshot$"
# every name _BUNDLE or _SNAPSHOT matches holds one of these: one pass of Arrow finds the few
# candidates among a million paths, and the exact rules run on those alone
_LITERALS = r"\.index|\.data-|\.lockfile|snapshot"


def kinds(paths: Sequence[str], in_steps: Optional[np.ndarray] = None, also: Sequence[str] = ()) -> np.ndarray:
    """Per path, CACHE, SNAPSHOT or "" (not tf.data's own). in_steps:
    whether each path was read inside a training step (None: unknown, so
    only a lock file in the session makes a bundle a cache); also: the
    session's other paths, evidence only (the lock file is written, not read)."""
    if len(also):
        n = len(paths)
        steps = None if in_steps is None else np.r_[np.asarray(in_steps, dtype=bool), np.zeros(len(also), bool)]
        both = pa.concat_arrays([_text(paths), _text(list(also))])
        return kinds(both, steps)[:n]
    text = _text(paths)
    out = np.full(len(text), "", dtype=object)
    maybe = np.flatnonzero(_mask(pc.match_substring_regex(text, _LITERALS))) if len(text) else []
    if not len(maybe):
        return out
    values = text.take(pa.array(maybe))
    snapshot = _mask(pc.match_substring_regex(values, _SNAPSHOT))
    out[maybe[snapshot]] = SNAPSHOT
    family = np.full(len(maybe), None, dtype=object)
    lock = np.zeros(len(maybe), dtype=bool)
    for j, p in enumerate(values.to_pylist()):
        m = _BUNDLE.match(p) if isinstance(p, str) and not snapshot[j] else None
        if m:       # (a//b names the file a/b names: one family)
            family[j], lock[j] = re.sub("/+", "/", m.group(1)), m.group(2) == "lockfile"
    caches = set(family[lock])
    if in_steps is not None:
        read = np.asarray(in_steps, dtype=bool)[maybe]
        caches |= set(family[read & (family != None)])    # noqa: E711  (elementwise)
    is_cache = np.array([f is not None and f in caches for f in family], dtype=bool)
    out[maybe[is_cache]] = CACHE
    return out


def is_cache(paths: Sequence[str], in_steps: Optional[np.ndarray] = None) -> np.ndarray:
    return kinds(paths, in_steps) == CACHE


def cache_names(paths: Sequence[str], in_steps: Optional[np.ndarray] = None) -> list:
    """The filenames given to cache(filename) whose files the paths hold, sorted."""
    paths = list(paths)
    if in_steps is not None and len(in_steps) < len(paths):     # the rest: evidence, not read
        in_steps = np.r_[np.asarray(in_steps, dtype=bool), np.zeros(len(paths) - len(in_steps), dtype=bool)]
    k = kinds(paths, in_steps)
    names = set()
    for p in np.asarray(list(paths), dtype=object)[k == CACHE]:
        m = _BUNDLE.match(str(p))
        if m:
            names.add(re.sub("/+", "/", m.group(1)))
    return sorted(names)


def _text(paths) -> pa.Array:
    if isinstance(paths, (pa.Array, pa.ChunkedArray)):
        return paths if isinstance(paths, pa.Array) else paths.combine_chunks()
    if isinstance(paths, pd.Series) and pd.api.types.is_string_dtype(paths.dtype) and paths.dtype != object:
        return pa.array(paths, type=pa.string())
    return arrow_paths([str(p) for p in paths])[0]


def _mask(result) -> np.ndarray:
    return np.asarray(pc.fill_null(result, False).to_numpy(zero_copy_only=False), dtype=bool)


def lock_files(snap, read: Sequence[str]) -> list:
    """The session's cache lock files (`<filename>_<n>.lockfile`: written,
    never read, so no cost row has them), the evidence that names the
    bundles beside them a cache; `read`: the paths already at hand."""
    every = [f["path"] for f in (snap.posix, snap.stdio) if f is not None and len(f)]
    if not every:
        return []
    s = pd.concat(every, ignore_index=True).drop_duplicates()
    s = s[s.astype(str).str.endswith(".lockfile") & ~s.isin(set(read))]
    return s.tolist()
