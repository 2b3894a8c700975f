"""`recommend`'s steps vectorised for a million files (Arrow string kernels,
integer peer groups, sorts of positions) against the way each was computed
before (recommend_oracle.py), on generated paths and figures with the
awkward cases: ties, repeated slashes, config directories at either end of
a path, newlines and non-ASCII text in names, checkpoint-like names."""
import random

import numpy as np
import pandas as pd
import pytest

import recommend_oracle as old
from tfdarshan.advice import advisor, cost_model
from tfdarshan.advice import checkpoint_findings as CF
from tfdarshan.advice import training_input as TI
from tfdarshan.capture import counters as C
from tfdarshan.capture import mounts as M

PARTS = ["", ".cache", ".config", "x.cache", ".cachex", "data", ".nv", "plugins", "tfdarshan", "a.darshan", "é",
         ".keras", "keras.json", "advice.json", "staged.json", "\n", ".local", "share", "profile", "model.ckpt-3",
         "checkpoint", "x.index", "a.data-00000-of-00001", "_temp", "part-1-of-2", "w.weights.h5.tmp1", "fast",
         # tf.data's own files and the MPI runtime's
         "c_0.lockfile", "c.index.tempstate12", "snapshot.metadata", "snapshot.metadata-tmp-7", "00000001.shard",
         "00000000.snapshot", "vader_segment.vm.0.1", "pmix_dstor_ds21_1", "ompi.vm.0", "smseg-pmix-1", "sem.mp-1"]
MOUNTS = [M.Mount("/", "ext4"), M.Mount("/data", "nfs"), M.Mount("/data/fast/", "tmpfs"), M.Mount("/dev/shm", "tmpfs")]


def paths(n, seed=1):
    rng = random.Random(seed)
    out = ["", "/", "//", "///x", "/data", "/data/", "/data//x", "/database/x", "/data/fast", "/data/fast/",
           "<STDERR>", "/dev/shm", ".cache", "/.cache", ".cache/", "a/.nv", "/dev/shm/sem.mp-1", "/dev/shm/nccl-a",
           "/dev/shm/x/sem.y", "/dev/shm/sem.\n"]
    out += [("/" if rng.random() < 0.8 else "") + "/".join(rng.choice(PARTS) for _ in range(rng.randint(0, 6)))
            for _ in range(n)]
    return out


@pytest.mark.parametrize("mounts", [MOUNTS, MOUNTS[1:], []])
def test_mount_points_as_before(mounts):
    p = paths(20_000)
    want = old.points_of(p, mounts)
    assert list(M.points_of(p, mounts)) == want
    assert list(M.points_of(pd.Series(p, dtype="str"), mounts)) == want
    assert len(set(want)) > 1 or not mounts


def test_training_input_reasons_as_before():
    p = paths(50_000, seed=2)
    want = old.reasons(p)
    assert (want != "").sum() > 1000 and (want == "").sum() > 1000
    assert (TI.reasons(p) == want).all()
    assert (TI.reasons(pd.Series(p, dtype="str")) == want).all()
    in_steps = np.random.default_rng(0).random(len(p)) < 0.5
    assert (TI.reasons(p, in_steps) == old.reasons(p, in_steps)).all()
    # every new reason is met, without steps and with them
    for given in (TI.reasons(p), TI.reasons(p, in_steps)):
        assert (given == TI.TFDATA).sum() > 100 and (given == TI.RUNTIME).sum() > 100


def test_checkpoint_names_as_before():
    p = paths(50_000, seed=3)
    want = np.array([CF.is_checkpoint(x) for x in p])
    assert 100 < want.sum() < len(p) - 100
    assert (CF._checkpoints(pd.Series(p, dtype=object)) == want).all()
    assert (CF._checkpoints(pd.Series(p, dtype="str")) == want).all()
    mixed = pd.Series(p[:100] + [None, float("nan")], dtype=object)     # not all text: one by one, as before
    assert list(CF._checkpoints(mixed)) == list(mixed.map(lambda x: isinstance(x, str) and CF.is_checkpoint(x)))


def costs_table(n, seed):
    """A cost table of n files with many ties in size and time."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "size": rng.choice([0, 100, 4096, 1 << 20, 3 << 20, 1 << 30], n) + rng.integers(0, 3, n),
        "current_time": np.round(rng.random(n), 2), "saving": rng.random(n) * rng.integers(0, 2, n),
        "on_fast_tier": rng.random(n) < 0.1, "training_input": rng.random(n) < 0.9})


@pytest.mark.parametrize("seed", range(4))
def test_baselines_and_greedy_choose_as_before(seed):
    costs = costs_table(20_000, seed)
    sizes, values = costs["size"].to_numpy(), costs["saving"].to_numpy()
    for capacity in (0, 1, 2, 4096, 5 << 20, 1 << 31, int(sizes.sum())):
        assert np.array_equal(advisor.under_2mb(costs, capacity), old.under_2mb(costs, capacity))
        assert np.array_equal(advisor.largest_time_first(costs, capacity), old.largest_time_first(costs, capacity))
        assert np.array_equal(advisor._greedy(sizes, values, capacity), old.greedy(sizes, values, capacity))
    assert len(advisor.under_2mb(costs, 1 << 31)) > 100


@pytest.mark.parametrize("seed", range(200))
def test_filling_in_order_as_before(seed):
    # small cases where the room runs out exactly, with empty files after it
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 6, int(rng.integers(0, 30)))
    order = rng.permutation(len(sizes))
    for capacity in range(0, 25, 3):
        assert np.array_equal(advisor._fill_in_order(order, sizes, capacity), old.fill_in_order(order, sizes, capacity))


def test_expected_costs_from_peers_as_before():
    rng = np.random.default_rng(7)
    n = 30_000
    p = pd.DataFrame({c: np.zeros(n) for c in C.columns("POSIX") if c not in ("record_id", "path")})
    p["path"] = pd.Series(paths(n - 16, seed=4), dtype="str")
    p["POSIX_READS"] = rng.integers(1, 100, n).astype(np.float64)
    p["POSIX_BYTES_READ"] = p["POSIX_READS"] * rng.choice([10, 4096, 1 << 20], n)
    p["POSIX_F_META_TIME"] = rng.exponential(1e-4, n)
    p["POSIX_F_READ_TIME"] = rng.exponential(1e-3, n) * (1 + 100 * (rng.random(n) < 0.01))    # outliers
    calls = rng.integers(0, 4, n).astype(np.float64)
    got, want = cost_model._expected_now(p, calls, p["POSIX_READS"].to_numpy(), MOUNTS), \
        old.expected_now(p, calls, p["POSIX_READS"].to_numpy(), MOUNTS)
    for k in ("low", "mid", "high"):
        assert np.allclose(got[0][k], want[0][k], rtol=1e-12, atol=0), k
    assert np.array_equal(got[1], want[1]) and got[1].max() > 1
    for a, b in zip(got[2], want[2]):
        assert np.allclose(a, b, rtol=1e-12, atol=0)
