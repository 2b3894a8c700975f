"""A many-rank job's view of the I/O Darshan cannot see: what one rank read
through a memmap and another copied with the kernel reaches the analysis
tables' per-file rows (summed over ranks), the job's summary and its file
table in the tab, while Darshan's own columns keep Darshan's counts."""
import json
import os
import shutil
import subprocess
import sys
import urllib.parse

import numpy as np
import pandas as pd
import pytest

from rank_session import real_session
from tb_helpers import fetch, tensorboard
from tfdarshan.analysis import analyze as A
from tfdarshan.logs.logdir import find_sessions
from tfdarshan.steps.series import read_parquet, write_parquet

SIZE = 4 << 20          # whole pages: a memmap summed from start to end maps every one
STEPS = 2
SCRIPT = """
import os, shutil, sys
import numpy as np
import tfdarshan
rank = int(os.environ["SLURM_PROCID"])
data, out = sys.argv[1], sys.argv[2]
for step in range({steps}):
    with tfdarshan.step(step):
        if rank == 0 and step == 0:
            m = np.memmap(data, dtype=np.uint8, mode="r")
            int(m.sum())
            del m
        if rank == 1 and step == 1:
            shutil.copyfile(data, os.path.join(out, "copy-1.bin"))
        with open(data, "rb") as f:
            f.read()
""".format(steps=STEPS)


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    root = tmp_path_factory.mktemp("job-kernel")
    data, out = root / "data.bin", root / "out"
    data.write_bytes(os.urandom(SIZE))
    out.mkdir()
    session_dir = real_session(root, SCRIPT, [data, out], 2)
    return session_dir, str(data), str(out / "copy-1.bin")


def test_the_files_table_holds_each_files_kernel_side_bytes_summed_over_ranks(job):
    session_dir, data, copy = job
    A.analyze(session_dir)
    files = A.read_table(session_dir, "files").set_index("path")
    d, c = files.loc[data], files.loc[copy]
    # Darshan's columns: each rank read the file with read() once a step; the
    # memmap and the copy moved no bytes through read() or write()
    assert (int(d["bytes_read"]), int(d["ranks"])) == (2 * STEPS * SIZE, 2)
    assert int(c["bytes_written"]) == 0
    # beyond them: rank 0's mapping brought in the whole file, rank 1's copy read it and wrote the copy
    assert int(d["mmap_bytes"]) == SIZE
    assert (int(d["copy_bytes_read"]), int(d["copy_bytes_written"])) == (SIZE, 0)
    assert (int(c["copy_bytes_read"]), int(c["copy_bytes_written"]), int(c["mmap_bytes"])) == (0, SIZE, 0)
    # one copy mechanism moved the bytes out of one file and into the other
    moved_out = int(d["copy_file_range_bytes"] + d["sendfile_bytes"] + d["splice_bytes"])
    moved_in = int(c["copy_file_range_bytes"] + c["sendfile_bytes"] + c["splice_bytes"])
    assert moved_out == moved_in == SIZE
    # no other file has any
    rest = files.drop(index=[data, copy])
    assert int(rest[["copy_bytes_read", "copy_bytes_written", "mmap_bytes"]].to_numpy().sum()) == 0
    # and `tfdarshan analyze` names the two files
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "analyze", str(session_dir)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    at = lines.index("beyond Darshan's counters (kernel-side copies, mmap), summed over ranks: 2 files")
    mib = f"{SIZE / 2**20:.1f} MiB"
    assert lines[at + 1].startswith(f"  {data}: {mib} read, {mib} through mmap (estimate) by ")
    assert lines[at + 2].startswith(f"  {copy}: {mib} written by ")


def test_the_tab_shows_them_in_the_jobs_summary_and_file_table(job):
    session_dir, data, copy = job
    logdir = session_dir.parents[2]
    [s] = [s for s in find_sessions(logdir) if s.directory == session_dir]
    q = {"run": s.run, "session": s.name}
    with tensorboard(logdir) as url:
        status, _, body = fetch(url, "/data/plugin/tfdarshan/summary?" + urllib.parse.urlencode(q))
        assert status == 200, body[:300]
        summary = json.loads(body)
        status, _, body = fetch(url, "/data/plugin/tfdarshan/files?" + urllib.parse.urlencode(
            {**q, "sort": "mmap_bytes", "order": "desc", "limit": 10}))
        assert status == 200, body[:300]
        page = json.loads(body)
    assert summary["ranks"] == 2
    # one copy of SIZE bytes, though it is on both of its files' rows
    assert (summary["mmap_bytes"], summary["copy_bytes"]) == (SIZE, SIZE)
    rows = {r[page["columns"].index("path")]: dict(zip(page["columns"], r)) for r in page["rows"]}
    d, c = rows[data], rows[copy]
    assert (d["mmap_bytes"], d["copy_bytes_read"], c["copy_bytes_written"]) == (SIZE, SIZE, SIZE)
    mechanisms = set(d["how"].split(", "))
    assert "mmap" in mechanisms and mechanisms - {"mmap"} == set(c["how"].split(", "))
    assert mechanisms - {"mmap"} <= {"copy_file_range", "sendfile", "splice"}
    assert page["rows"][0][page["columns"].index("path")] == data      # sorted by mapped bytes


def test_a_file_only_the_kernel_side_figures_hold_gets_a_row_of_its_own(job, tmp_path):
    # a memmap made before the window opened: no Darshan counter of the file
    # moved in it, and only the step series names it
    session_dir, _, _ = job
    A.ensure_tables(session_dir)
    copy = tmp_path / session_dir.name
    shutil.copytree(session_dir, copy, ignore=shutil.ignore_patterns("analysis"))
    [series] = copy.glob("*.rank0.step_files.parquet")
    rows = read_parquet(series)
    made = {c: 0 for c in rows.columns} | {"step": 0, "record_id": np.uint64(2**63 + 12345), "module": "POSIX",
                                           "path": "/only-mapped.bin", "mount": "/", "mmap_bytes": 12345}
    write_parquet(pd.concat([rows, pd.DataFrame([made])], ignore_index=True).astype(rows.dtypes.to_dict()), series)
    A.analyze(copy)
    row = A.read_table(copy, "files").set_index("path").loc["/only-mapped.bin"]
    assert (int(row["mmap_bytes"]), int(row["bytes_read"]), int(row["opens"]), int(row["ranks"])) == (12345, 0, 0, 1)
    assert row["mount"] == "/"
    ranks = A.read_table(copy, "ranks").set_index("rank")
    assert int(ranks.loc[0, "files"]) == int(A.read_table(session_dir, "ranks").set_index("rank").loc[0, "files"]) + 1
