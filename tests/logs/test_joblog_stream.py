"""The streamed job log (logs/joblog_stream.py, shared_fold.py, log_stream.py)
against the job log as it was written before (every rank log read whole,
reduced file by file in pandas: reduction_oracle.py), counter by counter,
on a generated session and on a real one; read back by PyDarshan
(darshan-util's C reader) and by our reader alike; regions of several zlib
streams read by both; progress shown."""
import io
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from zlib_ng import zlib_ng

import tfdarshan
from job_records import assert_same_counters, job_log_records, old_job_records, pydarshan_records
from rank_session import PIPELINE, pipeline_inputs, real_session
from reduction_oracle import _merge_top4
from tfdarshan.capture import counters as C
from tfdarshan.capture._native import darshan_hash
from tfdarshan.capture.mounts import Mount
from tfdarshan.capture.snapshot import Snapshot, empty_dxt, empty_extra, empty_values
from tfdarshan.cli.progress import StageProgress
from tfdarshan.logs import log_stream
from tfdarshan.logs.darshan_checker import inspect_log
from tfdarshan.logs.darshan_format import HEADER, MOD
from tfdarshan.logs.darshan_log import read_job_record, write_darshan_log
from tfdarshan.logs.darshan_writer import job_record
from tfdarshan.logs.joblog import write_job_log
from tfdarshan.logs.shared_fold import merge_top4

RANKS = 5
SHARED, PARTLY, OWN, STDIO_SHARED = 30, 10, 20, 8
TIED = range(5)             # shared files whose every rank spends the same time: ties for fastest and slowest
SIZES = [1, 100, 4096, 8192, 65536, 262144]
STRIDES = [-4096, -1, 0, 7, 4096]


def top4(rng, pool):
    """Darshan's top four of a random record: distinct non-zero values,
    by count then value, descending (0 = an empty slot)."""
    values = [v for v in rng.choice(pool, size=rng.integers(0, 5), replace=False) if v != 0]
    counts = rng.integers(1, 4, size=len(values))
    kept = sorted(zip(counts.tolist(), values), reverse=True)
    return [v for _, v in kept] + [0] * (4 - len(kept)), [c for c, _ in kept] + [0] * (4 - len(kept))


def posix_row(rng, path, rank, tied=False):
    row = {"record_id": darshan_hash(path), "path": path}
    c = lambda k, v: row.__setitem__(f"POSIX_{k}", v)
    c("OPENS", int(rng.integers(1, 4)))
    c("STATS", -1 if rng.random() < 0.3 else int(rng.integers(0, 3)))      # -1: Darshan's invalid count
    c("SEEKS", int(rng.integers(-2, 3)))
    c("READS", int(rng.integers(0, 50)))
    c("BYTES_READ", int(rng.integers(0, 10**7)))
    c("MAX_BYTE_READ", int(rng.integers(-1, 10**7)))
    c("CONSEC_READS", int(rng.integers(0, 20)))
    c("SIZE_READ_1K_10K", int(rng.integers(0, 9)))
    c("MODE", int(rng.choice([0o644, 0o600, 0o444])))
    c("MEM_ALIGNMENT", 8)
    c("FILE_ALIGNMENT", 4096)
    for kind, pool in (("ACCESS", SIZES), ("STRIDE", STRIDES)):
        vals, counts = top4(rng, pool)
        for i in range(4):
            c(f"{kind}{i + 1}_{kind}", int(vals[i]))
            c(f"{kind}{i + 1}_COUNT", int(counts[i]))
    for t in ("OPEN_START", "READ_START", "CLOSE_START", "OPEN_END", "READ_END", "CLOSE_END"):
        c(f"F_{t}_TIMESTAMP", 0.0 if rng.random() < 0.2 else float(rng.random() * 50))
    read, meta = (0.25, 0.125) if tied else (float(rng.random()), float(rng.random()) / 4)
    c("F_READ_TIME", read)
    c("F_META_TIME", meta)
    c("F_MAX_READ_TIME", 0.125 if tied else float(rng.random()) / 8)
    c("MAX_READ_TIME_SIZE", int(rng.integers(1, 10**6)))
    return row


def stdio_row(rng, path):
    row = {"record_id": darshan_hash(path), "path": path}
    for k in ("OPENS", "READS", "WRITES", "BYTES_READ", "BYTES_WRITTEN", "MAX_BYTE_READ"):
        row[f"STDIO_{k}"] = int(rng.integers(0, 10**5))
    for t in ("OPEN_START", "READ_START", "OPEN_END", "READ_END"):
        row[f"STDIO_F_{t}_TIMESTAMP"] = float(rng.random() * 50)
    row["STDIO_F_READ_TIME"], row["STDIO_F_META_TIME"] = float(rng.random()), float(rng.random())
    return row


def frame(module, rows):
    f = C.empty_frame(module)
    return pd.DataFrame([{c: 0 for c in f.columns} | r for r in rows], columns=f.columns).astype(f.dtypes.to_dict())


def write_rank_logs(root, rng, mixed=True):
    """RANKS rank logs: SHARED files every rank read (TIED of them in equal
    times), PARTLY files ranks 0-2 read, OWN files each, a file ranks 0-2
    read through POSIX and 3-4 through STDIO (every rank names it, no
    module has it from all), STDIO_SHARED files every rank fopened; each
    rank started 0.37 s after the one before; odd ranks list their files
    in an order of their own. Not `mixed`: POSIX files only, so that every
    rank holds every file all ranks name."""
    logs = {}
    for r in range(RANKS):
        posix = [posix_row(rng, f"/data/shared-{i}", r, tied=i in TIED) for i in range(SHARED)]
        posix += [posix_row(rng, f"/data/part-{i}", r) for i in range(PARTLY) if r < 3]
        posix += [posix_row(rng, f"/data/rank{r}-{i}", r) for i in range(OWN)]
        stdio = [stdio_row(rng, f"/data/text-{i}") for i in range(STDIO_SHARED)] if mixed else []
        if mixed and r < 3:
            posix.append(posix_row(rng, "/data/both", r))
        elif mixed:
            stdio.append(stdio_row(rng, "/data/both"))
        if r % 2:                       # ranks list their files in orders of their own, or the same
            posix = [posix[i] for i in rng.permutation(len(posix))]
        meta = {"origin_unix_time": 1.7e9 + 0.37 * r, "start": 0.0, "end": 60.0 + r, "hostname": f"node{r // 2}"}
        snap = Snapshot(frame("POSIX", posix), frame("STDIO", stdio), empty_values(), empty_extra(), empty_dxt(), meta)
        logs[r] = write_darshan_log(snap, root / f"node{r // 2}.rank{r}.darshan", metadata={"rank": str(r)},
                                    heatmap=False)
    return logs


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("generated")
    logs = write_rank_logs(root, np.random.default_rng(21))
    return root, logs, write_job_log(root, logs, "gen", RANKS)


def test_generated_session_equals_the_old_reduction(generated):
    root, logs, job = generated
    got, want = job_log_records(job), old_job_records(logs, RANKS)
    for module in C.MODULES:
        assert_same_counters(got[module], want[module], module)
    posix, stdio = got["POSIX"], got["STDIO"]
    # what the session holds, counted from its design
    assert (posix["rank"] == -1).sum() == SHARED and (stdio["rank"] == -1).sum() == STDIO_SHARED
    assert len(posix) == SHARED + 3 * PARTLY + RANKS * OWN + 3
    both = posix[posix["path"] == "/data/both"]["rank"].tolist(), stdio[stdio["path"] == "/data/both"]["rank"].tolist()
    assert both == ([0, 1, 2], [3, 4])
    tied = posix[posix["path"].isin([f"/data/shared-{i}" for i in TIED])]
    assert (tied["POSIX_FASTEST_RANK"] == RANKS - 1).all() and (tied["POSIX_SLOWEST_RANK"] == RANKS - 1).all()
    # -1 counts met (STATS) and top-four sets merged over five ranks
    assert (posix["POSIX_STATS"] == -1).any() and (posix[posix["rank"] == -1]["POSIX_ACCESS4_COUNT"] > 0).any()


def test_ranks_holding_every_shared_file_equal_the_old_reduction(tmp_path):
    # each rank holds all the shared files: folded in place, in the first
    # rank's order (even ranks list them so) or gathered into it (odd ranks)
    logs = write_rank_logs(tmp_path, np.random.default_rng(5), mixed=False)
    job = write_job_log(tmp_path, logs, "posix", RANKS)
    got, want = job_log_records(job), old_job_records(logs, RANKS)
    assert_same_counters(got["POSIX"], want["POSIX"], "POSIX")
    assert (got["POSIX"]["rank"] == -1).sum() == SHARED and not len(got["STDIO"])


def test_pydarshan_reads_what_our_reader_reads(generated):
    _, _, job = generated
    ours, theirs = job_log_records(job), pydarshan_records(job)
    for module in C.MODULES:
        pd.testing.assert_frame_equal(theirs[module], ours[module], check_dtype=False)
    meta = read_job_record(job)["metadata"]
    assert (meta["ranks"], meta["hosts"], meta["source"]) == (str(RANKS), "node0,node1,node2", "job")
    snap = tfdarshan.read_darshan_log(job)
    assert snap.meta["nprocs"] == RANKS and snap.meta["origin_unix_time"] == pytest.approx(1.7e9)
    assert snap.meta["end"] == pytest.approx(60.0 + 4 + 4 * 0.37)


def test_real_session_equals_the_old_reduction(tmp_path):
    real = 3
    session = real_session(tmp_path, PIPELINE, pipeline_inputs(tmp_path / "data", real), real)
    logs = {int(p.name.split(".rank")[1].split(".")[0]): p for p in session.glob("*.rank*.darshan")}
    job = write_job_log(session, logs, "real", real)
    got, want = job_log_records(job), old_job_records(logs, real)
    for module in C.MODULES:
        assert_same_counters(got[module], want[module], module)
    shared = got["POSIX"][got["POSIX"]["path"] == str(tmp_path / "data" / "shared.bin")]
    assert shared["rank"].tolist() == [-1] and shared["POSIX_BYTES_READ"].iat[0] == 3 * real * 200_000


def test_a_module_region_damaged_inside_is_skipped(generated, tmp_path):
    # rank 2's POSIX region is in bounds but does not inflate: pass 1 cannot
    # see it; the job log is written again without that rank
    _, logs, _ = generated
    copies = {}
    for r, p in logs.items():
        copies[r] = tmp_path / p.name
        copies[r].write_bytes(p.read_bytes())
    data = bytearray(copies[2].read_bytes())
    off, length = HEADER.unpack_from(data, 0)[6 + 2 * MOD["POSIX"]:8 + 2 * MOD["POSIX"]]
    data[off + length // 2:off + length // 2 + 16] = bytes(16)
    copies[2].write_bytes(bytes(data))
    skipped = []
    job = write_job_log(tmp_path, copies, "damaged", RANKS, skipped=skipped)
    assert [s["log"] for s in skipped] == [copies[2].name] and "POSIX region is corrupted" in skipped[0]["reason"]
    meta = read_job_record(job)["metadata"]
    assert (meta["ranks"], meta["skipped"], meta["skipped_logs"]) == (str(RANKS - 1), "1", copies[2].name)
    got, want = job_log_records(job), old_job_records(copies, RANKS)
    for module in C.MODULES:
        assert_same_counters(got[module], want[module], module)
    assert not (got["POSIX"]["rank"] == -1).any() and 2 not in set(got["POSIX"]["rank"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "no temporary file is left"


def test_top4_merge_equals_darshans_macro_row_by_row():
    # Darshan's records hold distinct values (the fast path); a damaged or
    # foreign one may repeat a value (the step-by-step path): both as the macro
    rng = np.random.default_rng(4)
    rows = [(top4(rng, STRIDES + SIZES), top4(rng, STRIDES + SIZES)) for _ in range(3000)]
    for (v, _), _ in rows[::5]:
        v[1] = v[0]                     # a value twice in the first set
    for (_, c), (_, c2) in rows[1::7]:
        c[0], c2[-1] = 0, -1            # counts no Darshan writes
    acc_v, acc_c, new_v, new_c = (np.array([r[i][j] for r in rows], dtype=np.int64) for i in (0, 1) for j in (0, 1))
    vals, cnts = merge_top4(acc_v, acc_c, new_v, new_c)
    for i, ((av, ac), (nv, nc)) in enumerate(rows):
        assert (vals[i].tolist(), cnts[i].tolist()) == tuple(map(list, _merge_top4(av, ac, nv, nc))), rows[i]


def test_regions_of_several_streams_read_by_both(tmp_path):
    # a log by libdarshan-util (one stream a region) written again with its
    # job, name and POSIX regions cut into several streams, at arbitrary bytes
    rng = np.random.default_rng(7)
    rows = [posix_row(rng, f"/data/f{i}", 0) for i in range(300)]
    snap = Snapshot(frame("POSIX", rows), C.empty_frame("STDIO"), empty_values(), empty_extra(), empty_dxt(),
                    {"origin_unix_time": 1.7e9, "start": 0.0, "end": 9.0, "hostname": "h"})
    one = write_darshan_log(snap, tmp_path / "one.darshan", heatmap=False)
    info = inspect_log(one)
    data = one.read_bytes()
    h = HEADER.unpack_from(data, 0)
    names_raw = zlib_ng.decompress(data[h[4]:h[4] + h[5]])
    writer = log_stream.StreamWriter(tmp_path / "many.darshan")
    for region, raw in ((-2, info["job"]), (-1, names_raw), (MOD["POSIX"], info["modules"]["POSIX"])):
        writer.start(region)
        cuts = sorted({0, 1000, len(raw) // 3, len(raw) // 3 + 1, len(raw)})
        for lo, hi in zip(cuts, cuts[1:]):
            writer.write(log_stream.deflate(raw[lo:hi]))
    many = writer.close()
    assert h[5] < HEADER.unpack_from(many.read_bytes(), 0)[5], "the name region is more than one stream"
    for module in C.MODULES:
        pd.testing.assert_frame_equal(pydarshan_records(many)[module], pydarshan_records(one)[module])
        pd.testing.assert_frame_equal(job_log_records(many)[module], job_log_records(one)[module])
    assert read_job_record(many) == read_job_record(one)


def test_job_region_is_the_librarys_byte_for_byte(tmp_path):
    # many mounts (the table is cut where Darshan's buffer ends) and metadata
    # past the job record's 1 KiB (a line that does not fit left out whole, and named)
    mounts = [Mount(f"/mnt/{'x' * 40}{i}", "ext4") for i in range(120)]
    snap = Snapshot(C.empty_frame("POSIX"), C.empty_frame("STDIO"), empty_values(), empty_extra(), empty_dxt(),
                    {"origin_unix_time": 1.7e9 + 0.25, "start": 0.0, "end": 3.5, "hostname": "h"})
    kw = dict(exe="python train.py --epochs 3", jobid=77, mounts=mounts, metadata={"note": "n" * 2000}, nprocs=4)
    lib = write_darshan_log(snap, tmp_path / "lib.darshan", heatmap=False, **kw)
    ours = log_stream.job_region(job_record(snap.meta, snap.start, snap.end, **kw))
    assert inspect_log(lib)["job"] == ours
    assert 40 < ours.count(b"\next4\t") < 120 and b"omitted=note\n" in ours and b"note=n" not in ours


def test_joblog_shows_a_line_per_stage_off_a_terminal(generated, tmp_path):
    _, logs, _ = generated
    for p in logs.values():
        (tmp_path / p.name).write_bytes(p.read_bytes())
    r = subprocess.run([sys.executable, "-m", "tfdarshan", "joblog", str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert [line.split(": ")[1] for line in lines] == ["names and job records", "POSIX records", "STDIO records"]
    assert all(line.startswith("tfdarshan joblog: ") and f"{RANKS} rank logs" in line for line in lines)


def test_a_bar_on_a_terminal():
    out = io.StringIO()
    progress = StageProgress("tfdarshan joblog", {"POSIX": "POSIX records"}, "rank log", stream=out, bar=True)
    for done in range(4):
        progress("POSIX", done, 3)
    progress.close()
    assert "POSIX records" in out.getvalue() and "3/3" in out.getvalue()


def test_name_region_split_as_darshan_util_reads_it():
    # darshan-util ends a name record at the first NUL 8 or more bytes past
    # its start; ids may hold NULs. The reference is a regular expression.
    import re
    from tfdarshan.logs.darshan_format import parse_names
    record = re.compile(rb"(.{8})([^\x00]*)\x00", re.S)

    def reference(raw):
        found = record.findall(raw)
        if not found:
            return None if raw else ([], [])
        ids, names = zip(*found)
        if 9 * len(found) + sum(map(len, names)) != len(raw):
            return None                 # not whole records back to back
        return [int.from_bytes(i, "little") for i in ids], [n.decode("utf-8", "surrogateescape") for n in names]

    rng = np.random.default_rng(3)
    damaged = 0
    for _ in range(2000):
        n = int(rng.integers(0, 20))
        ids = [bytearray(rng.integers(0, 256, 8, dtype=np.uint8).tobytes()) for _ in range(n)]
        for i in ids:
            if rng.random() < 0.5:      # NULs inside ids
                i[int(rng.integers(0, 8))] = 0
        raw = b"".join(bytes(i) + rng.integers(1, 256, int(rng.integers(0, 9)), dtype=np.uint8).tobytes() + b"\0"
                       for i in ids)
        if raw and rng.random() < 0.3:
            raw = bytearray(raw)
            raw[int(rng.integers(0, len(raw)))] = int(rng.integers(0, 2))
            raw = bytes(raw[:len(raw) - int(rng.integers(0, 3))])
        want, got = reference(raw), parse_names(raw)
        damaged += want is None
        assert (got is None) == (want is None), raw
        if got is not None:
            assert ([int(i) for i in got[0]], got[1]) == want, raw
    assert damaged > 100


def test_written_at_interpreter_exit(generated, tmp_path):
    # `tfdarshan run`'s last rank may write the job log from atexit, when no thread can start
    root, logs, job = generated
    copies = {r: tmp_path / p.name for r, p in logs.items()}
    for r, p in logs.items():
        copies[r].write_bytes(p.read_bytes())
    script = ("import atexit, pathlib\nfrom tfdarshan.logs.joblog import write_job_log\n"
              f"logs = {{r: pathlib.Path(p) for r, p in {({r: str(p) for r, p in copies.items()})!r}.items()}}\n"
              f"atexit.register(write_job_log, pathlib.Path({str(tmp_path)!r}), logs, 'atexit', {RANKS})\n")
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and not r.stderr, r.stderr
    got, want = job_log_records(tmp_path / "atexit.job.darshan"), job_log_records(job)
    for module in C.MODULES:
        pd.testing.assert_frame_equal(got[module], want[module])


def test_a_rank_past_nprocs_is_refused(generated, tmp_path):
    # darshan-util's readers abort the whole process on a record of rank >= nprocs
    from tfdarshan.errors import DarshanLogError
    _, logs, _ = generated
    with pytest.raises(DarshanLogError, match="rank 4 in a log of 2"):
        write_job_log(tmp_path, {0: logs[0], 4: logs[4]}, "past")
    assert not list(tmp_path.iterdir())
