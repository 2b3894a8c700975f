"""Which of a session's files are training input, the only files staging
may move: files read inside training steps (inside the window, when it has
no step markers), through calls or through memory maps, and never a user's
configuration or cache files (Keras' keras.json, matplotlib's font cache,
~/.cache, ~/.config), tf.data's own cache and snapshot files
(tfdata_files.py), the runtime's shared-memory segments (Open MPI's
vader/sm segments, PMIx's dstor files), nor tfdarshan's own state (the
staging map staged.json, stored tiers, session files). What is left out is
said, with why; the rules look at path components, so they hold for logs
from any user and machine."""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tfdarshan.advice import tfdata_files
from tfdarshan.capture.arrow_text import arrow_paths

# a path with one of these components is configuration or cache, not data
CONFIG_PARTS = (".cache", ".config", ".keras", ".matplotlib", ".ipython", ".jupyter", ".nv")
CONFIG_ENV = ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPLCONFIGDIR", "KERAS_HOME")
# tfdarshan's own files: its data directory, session directories, what it writes beside them
OWN_DIRS = ("/.local/share/tfdarshan/", "/plugins/tfdarshan/", "/plugins/profile/")
OWN_SUFFIXES = (".darshan", ".steps.parquet", ".step_files.parquet", ".coverage.json", "/advice.json",
                "/staged.json", "/tiers.json", ".manifest.json", ".state.json", ".xplane.pb")
OWN_ENV = ("TFDARSHAN_STAGING_MAP",)

# the MPI runtime's own files: shared-memory transports and the launcher's session
# directories (Open MPI 4 and 5, PMIx, MPICH, Intel MPI, UCX, NCCL, POSIX semaphores)
RUNTIME_PATTERNS = (
    r"(^|/)(ompi|prte|prterun)\.[^/]+\.\d+/",                    # Open MPI / PRRTE session directories
    r"(^|/)pmix[^/]*/", r"(^|/)[^/]*pmix[^/]*$",                   # PMIx dstor segments and locks
    r"(^|/)(vader_segment|sm_segment|psm2?_shm|mpich_shar_tmp|shm-col-space-|Intel_MPI_|ucx_shm)[^/]*$",
    r"^/dev/shm/(sem\.|nccl-)[^/]*$")

CONFIG = "a user configuration or cache file (Keras, matplotlib, ~/.cache, ~/.config), not training data"
OWN = "tfdarshan's own state or output (staging map, tiers, session files)"
TFDATA = ("tf.data's own cache or snapshot file (ds.cache(filename), ds.snapshot(path)), made from the input by "
          "the pipeline itself: to have it on the fast tier, give cache() or snapshot() a path there")
RUNTIME = "the MPI runtime's own shared memory or session files (Open MPI, PMIx), not data"
OUTSIDE = "read only outside the training steps (set-up before the first step, or after the last)"
REASONS = (CONFIG, OWN, TFDATA, RUNTIME, OUTSIDE)
# the file table's short words for a file that is not training input, by reason
KIND = {CONFIG: "configuration", OWN: "tfdarshan", RUNTIME: "MPI runtime", OUTSIDE: ""}


def _env_dirs(names) -> Tuple[str, ...]:
    return tuple(os.path.join(os.path.abspath(os.environ[n]), "") for n in names if os.environ.get(n))


def reasons(paths: Sequence[str], in_steps: Optional[np.ndarray] = None, also: Sequence[str] = ()) -> np.ndarray:
    """Per path, why it is not training input ("" when it is). in_steps:
    whether each path was read inside a training step (None: no steps to
    tell, every file counts as read in the window); also: the session's
    other paths, which tell a tf.data cache by its lock file. Vectorised
    with Arrow's string kernels: a session can read a million files."""
    if isinstance(paths, pd.Series) and pd.api.types.is_string_dtype(paths.dtype) and paths.dtype != object:
        s = pa.array(paths, type=pa.string())       # already Arrow text: no Python object a path
    else:
        s, _ = arrow_paths([str(p) for p in paths])
    test = lambda result: np.asarray(result.to_numpy(zero_copy_only=False), dtype=bool)   # noqa: E731
    # a whole path component (between slashes, or at either end) that is a config directory
    parts = "|".join(re.escape(p) for p in CONFIG_PARTS)
    config = test(pc.match_substring_regex(s, f"(^|/)({parts})(/|$)"))
    for d in _env_dirs(CONFIG_ENV):
        config |= test(pc.starts_with(s, d))
    own = np.zeros(len(s), dtype=bool)
    own |= test(pc.match_substring_regex(s, "|".join(re.escape(d) for d in OWN_DIRS)))
    own |= test(pc.match_substring_regex(s, "(" + "|".join(re.escape(x) for x in OWN_SUFFIXES) + ")$"))
    runtime = test(pc.match_substring_regex(s, "|".join(RUNTIME_PATTERNS)))
    tfdata = tfdata_files.kinds(s, in_steps, also) != ""
    for name in OWN_ENV:
        if os.environ.get(name):
            own |= test(pc.equal(s, os.path.abspath(os.environ[name])))
    if os.environ.get("XDG_DATA_HOME"):
        own |= test(pc.starts_with(s, os.path.join(os.path.abspath(os.environ["XDG_DATA_HOME"]), "tfdarshan", "")))
    out = np.full(len(s), "", dtype=object)
    if in_steps is not None:
        out[~np.asarray(in_steps, dtype=bool)] = OUTSIDE
    out[tfdata] = TFDATA
    out[runtime] = RUNTIME
    out[config] = CONFIG
    out[own] = OWN
    return out


def kinds(paths: Sequence[str], in_steps: Optional[np.ndarray] = None) -> np.ndarray:
    """Per path, what a file that is not input is, in a word or two for
    the file table ("configuration", "tf.data cache", "MPI runtime",
    "tfdarshan"); "" for input and for what is unknown. The paths are the
    session's (a cache is told by its lock file among them)."""
    why = reasons(paths, in_steps)
    out = np.array([KIND.get(w, "") for w in why], dtype=object) if len(why) else np.zeros(0, dtype=object)
    tf = why == TFDATA
    if tf.any():
        out[tf] = tfdata_files.kinds(paths, in_steps)[tf]
    return out


def read_in_steps(paths: Sequence[str], step_files: Optional[pd.DataFrame]) -> Optional[np.ndarray]:
    """Whether each path was read in a training step of the series (any
    process's), or belongs to a dataset that was (same directory and shard
    pattern: a pipeline prefetches its first files before the first step
    begins); None when the series has no training steps."""
    if step_files is None or step_files.empty or "path" not in step_files:
        return None
    real = step_files[step_files["step"] >= 0]
    if real.empty:
        return None
    # through calls, or through a memory map (its pages brought in inside the step)
    mapped = real["mmap_bytes"] > 0 if "mmap_bytes" in real else False
    read = real[(real["reads"] > 0) | (real["bytes_read"] > 0) | mapped]
    s = pd.Series(list(paths), dtype=object)
    inside = s.isin(set(read["path"])).to_numpy(bool)
    patterns = set(pattern(pd.Series(read["path"].unique(), dtype=object)))
    return inside | pattern(s).isin(patterns).to_numpy(bool)


def pattern(paths: pd.Series) -> pd.Series:
    """train-00003-of-01024.tfrecord -> <dir>/train-*-of-*.tfrecord (digits are shard numbers)."""
    if not len(paths):
        return paths
    # (by Arrow's string kernels: a session's 100,000s of paths, one regex call each, were seconds)
    # (as text a path that is not UTF-8 is its display form, the same in both sets a caller compares)
    text, _ = arrow_paths([str(p) for p in paths])
    head = pc.replace_substring_regex(text, r"[^/]*$", "")
    name = pc.replace_substring_regex(pc.replace_substring_regex(text, r"^.*/", ""), r"\d+", "*")
    return pd.Series(pc.binary_join_element_wise(head, name, "").to_numpy(zero_copy_only=False),
                     index=paths.index, dtype=object)


def left_out(paths: Sequence[str], sizes: Sequence[int], why: np.ndarray) -> List[Dict]:
    """What was left out, grouped by reason: files, bytes and a few examples."""
    out = []
    for reason in REASONS:
        idx = np.nonzero(why == reason)[0]
        if len(idx):
            out.append({"reason": reason, "files": int(len(idx)), "bytes": int(np.asarray(sizes)[idx].sum()),
                        "examples": [str(paths[i]) for i in idx[:3]]})
    return out
