"""A fast tier is judged on its own file system (advice/tiers.py,
cost_model.py): a stored probe of an enclosing mount is never taken for a
directory on another mount below it, and a file counts as already on the
fast tier only when it sits inside the tier's directory and on the same
file system. Once a directory on the local ext4 disk (the tier "/") was
taken to hold data served by a FUSE mount below it, and `recommend` said
"Nothing worth staging"."""
import numpy as np
import pandas as pd

from tfdarshan.advice import tiers as T
from tfdarshan.advice.cost_model import file_costs
from tfdarshan.capture import counters as C
from tfdarshan.capture.mounts import Mount
from tfdarshan.capture.snapshot import Snapshot, empty_dxt, empty_values

MOUNTS = [Mount("/", "ext4"), Mount("/dev/shm", "tmpfs"), Mount("/mnt/slow", "fuse.slowfs"),
          Mount("/local/nvme", "xfs")]
ROOT = T.Tier(path="/", fstype="ext4", name="root disk", read_latency=50e-6, open_latency=5e-6, bandwidth=1e9)
SHM = T.Tier(path="/dev/shm", fstype="tmpfs", name="shm", read_latency=1e-6, open_latency=1e-6, bandwidth=1e10)
NVME_DIR = T.Tier(path="/local/nvme/stage", name="nvme", read_latency=20e-6, open_latency=5e-6, bandwidth=3e9)


def test_a_tier_of_an_enclosing_mount_is_not_the_directorys():
    assert T.tier_for("/dev/shm/fast", [ROOT], MOUNTS) is None
    assert T.tier_for("/mnt/slow/data/x", [ROOT], MOUNTS) is None
    assert T.tier_for("/dev/shm/fast", [ROOT, SHM], MOUNTS) is SHM
    assert T.tier_for("/work/fast", [ROOT, SHM], MOUNTS) is ROOT
    # a declared directory on a mount holds what is below it, not the rest of its mount
    assert T.tier_for("/local/nvme/stage/a", [ROOT, NVME_DIR], MOUNTS) is NVME_DIR
    assert T.tier_for("/local/nvme/other/a", [ROOT, NVME_DIR], MOUNTS) is None


def test_files_on_another_mount_below_the_tier_are_not_on_it():
    paths = ["/work/data/a", "/mnt/slow/b", "/dev/shm/c", "/local/nvme/stage/d", "/local/nvme/e"]
    assert T.on_tier(paths, ROOT, MOUNTS).tolist() == [True, False, False, False, False]
    assert T.on_tier(paths, SHM, MOUNTS).tolist() == [False, False, True, False, False]
    assert T.on_tier(paths, NVME_DIR, MOUNTS).tolist() == [False, False, False, True, False]


def _snapshot(paths):
    df = C.empty_frame("POSIX")
    rows = [{**{c: 0 for c in df.columns}, "path": p, "POSIX_OPENS": 1, "POSIX_READS": 2, "POSIX_BYTES_READ": 12288,
             "POSIX_MAX_BYTE_READ": 12287, "POSIX_F_READ_TIME": 0.006, "POSIX_F_META_TIME": 0.016} for p in paths]
    df = pd.DataFrame(rows, columns=df.columns).astype(C.empty_frame("POSIX").dtypes.to_dict())
    df["record_id"] = np.arange(1, len(df) + 1, dtype=np.uint64)
    extra = pd.DataFrame({"record_id": df["record_id"], "module": "POSIX", "ZERO_READS": np.ones(len(df), np.int64)})
    return Snapshot(df, C.empty_frame("STDIO"), empty_values(), extra, empty_dxt(),
                    {"start": 0.0, "end": 10.0, "mounts": [[m.point, m.fstype] for m in MOUNTS]})


def test_a_local_disk_tier_stages_the_slow_mounts_files():
    # the data on the FUSE mount, the fast tier a directory on "/" (probed: its path is the mount point)
    slow = [f"/mnt/slow/r3_{i}.bin" for i in range(8)]
    local = [f"/work/data/r0_{i}.bin" for i in range(8)]
    costs = file_costs(_snapshot(slow + local), ROOT)
    on = dict(zip(costs["path"], costs["on_fast_tier"]))
    assert not any(on[p] for p in slow) and all(on[p] for p in local)
    saving = dict(zip(costs["path"], costs["saving"]))
    assert all(saving[p] > 0 for p in slow) and all(saving[p] == 0 for p in local)
