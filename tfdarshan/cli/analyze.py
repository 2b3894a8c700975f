"""`tfdarshan analyze LOGDIR`: reduce a session's logs (one per rank, or a
directory of imported logs) on Dask into Parquet tables per file, rank,
step and rank, and mount, in <session>/analysis/. Runs in this process for
small sessions, on a local cluster sized to the machine for larger ones, or
on your own cluster with --scheduler (or TFDARSHAN_DASK_SCHEDULER)."""
from __future__ import annotations

import argparse
import sys

from tfdarshan.cli import path_arg
from tfdarshan.errors import TfdarshanError
from tfdarshan.measures.human import count


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help="per-file, per-rank and per-step tables on Dask", description=__doc__)
    p.add_argument("source", type=path_arg, help="a TensorBoard log directory, or a directory of Darshan logs")
    p.add_argument("--session", help="session name in the log directory (default: newest)")
    p.add_argument("--scheduler", help="a Dask scheduler address, e.g. tcp://host:8786 (default: embedded)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import pathlib
    from tfdarshan.analysis.analyze import analyze, rank_logs, read_table
    from tfdarshan.capture import mounts as M
    from tfdarshan.logs import live_log, skipping
    from tfdarshan.measures import input_wait as W
    from tfdarshan.measures.human import percent
    from tfdarshan.logs.logdir import pick_session
    src = pathlib.Path(args.source)
    if not src.is_dir():
        raise TfdarshanError(f"{src}: not a directory")
    # processes killed before writing their logs: their live logs first, wherever they are
    early = live_log.summary_line(live_log.recover_all(src))
    if early:
        print(f"tfdarshan analyze: {early}", file=sys.stderr)
    if rank_logs(src) and not args.session:
        session_dir = src                  # the session directory itself, or a folder of logs
    else:
        session_dir = pick_session(src, args.session)[0].directory
    from tfdarshan.analysis.analyze import STAGES
    from tfdarshan.cli.progress import StageProgress
    # a bar a stage on a terminal, a line a stage in a batch job's log
    progress = StageProgress("tfdarshan analyze", STAGES, {"read": "log", "files": "id bucket"})
    try:
        r = analyze(session_dir, scheduler=args.scheduler, progress=progress)
    finally:
        progress.close()
    if live_log.summary_line(r["recovered"]):
        print(f"tfdarshan analyze: {live_log.summary_line(r['recovered'])}", file=sys.stderr)
    if r["skipped"]:
        print(f"tfdarshan analyze: {skipping.warning_line(r['skipped'])}", file=sys.stderr)
    ranks = read_table(session_dir, "ranks").sort_values(W.RANK_SHARE, ascending=False, na_position="last")
    files = read_table(session_dir, "files")
    partial = list(ranks[ranks["partial"]]["log"])
    left_out = (f", {len(r['skipped'])} unreadable skipped" if r["skipped"] else "") + \
        (f", {len(partial)} partial ({', '.join(partial[:10])}: {live_log.WHY})" if partial else "")
    print(f"analyzed {count(r['ranks'], 'log')}{left_out} in {session_dir} ({r['where']}): {count(len(files), 'file')}; tables in "
          f"{session_dir / 'analysis'}")
    waits = ranks.dropna(subset=[W.RANK_SHARE])
    if len(waits):
        # the job's figure (the tab's headline, recommend's), then each rank's own
        share = W.share(waits[W.WAIT_TIME].sum(), waits[W.STEP_TIME].sum())
        print(W.job_line(share, len(ranks)))
        print(f"{W.PER_RANK}, longest first: " + ", ".join(
            f"rank {int(r)} {percent(x)}" for r, x in zip(waits["rank"].head(5), waits[W.RANK_SHARE].head(5))))
    print(most_shared_line(files, r["ranks"], "ranks" if any(".rank" in str(x) for x in ranks["log"])
                           else "processes"))
    _print_kernel_files(files)
    return 0


def most_shared_line(files, logs: int, noun: str) -> str:
    """The data file the most ranks moved data of; only a file of two or more
    is shared, and the streams, configuration files (the font cache every
    process reads), tf.data's and the runtime's own files are not data."""
    from tfdarshan.advice import training_input as TI
    from tfdarshan.capture import mounts as M
    moved = files[(files["bytes_read"] + files["bytes_written"] > 0) & ~files["path"].isin(M.STREAM_PATHS)
                  & (files["ranks"] >= 2)]
    moved = moved[TI.reasons(moved["path"]) == ""] if len(moved) else moved
    if moved.empty:
        return f"shared files: none (no data file was read or written by more than one of the {logs} {noun})"
    top = moved.sort_values(["ranks", "bytes_read"], kind="stable").tail(1)
    return f"most shared file: {top['path'].iat[0]} ({int(top['ranks'].iat[0])} of {logs} {noun})"


def _print_kernel_files(files) -> None:
    """The files whose data also moved where Darshan's counters cannot see."""
    import pandas as pd
    from tfdarshan.advice import training_input as TI
    from tfdarshan.capture import kernel_io as K
    k = files[(files[["copy_bytes_read", "copy_bytes_written", "mmap_bytes"]] > 0).any(axis=1)]
    # the MPI runtime maps its own shared memory: runtime I/O, said apart from the data's
    runtime = TI.reasons(k["path"]) == TI.RUNTIME if len(k) else []
    if len(k) and runtime.any():
        r = k[runtime]
        print(f"the MPI runtime's own shared memory (Open MPI, PMIx), mapped, not data: {count(len(r), 'file')}, "
              f"~{K.describe_bytes(int(r['mmap_bytes'].sum()))} summed over ranks")
        k = k[~runtime]
    if k.empty:
        return
    shaped = pd.DataFrame({"path": k["path"], "bytes_read": k["copy_bytes_read"] + k["mmap_bytes"],
                           "bytes_written": k["copy_bytes_written"], "mmap_bytes": k["mmap_bytes"],
                           "how": K.how_of_table(k)})
    print(f"beyond Darshan's counters (kernel-side copies, mmap), summed over ranks: {count(len(k), 'file')}")
    for line in K.describe(shaped.sort_values(["bytes_read", "bytes_written"], ascending=False, kind="stable")):
        print(f"  {line}")
