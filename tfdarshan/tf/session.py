"""A profiling session: one window of I/O, its step series, and the files it
leaves in a session directory (plugins/profile/<run>/ beside XProf's
profile, else plugins/tfdarshan/<run>/: see logs/logdir.py):

    <host>.darshan              the window's Darshan log
    <host>.steps.parquet        per-step totals
    <host>.step_files.parquet   per step and file
    <host>.xplane.pb            I/O lines merged in (when XProf wrote one)
    <host>.served.json          files served from staged copies (capture/served.py)

With several processes in one run directory (workers, children) each uses
<host>_<pid>."""
from __future__ import annotations

import datetime
import json
import logging
import os
import pathlib
import socket
import sys
import time
from typing import Dict, Optional

import pandas as pd

from tfdarshan.capture import _native, config, cores, live, mounts as M, ranks, served
from tfdarshan.capture.recorder import RECORDER
from tfdarshan.capture.snapshot import Snapshot
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import destination, live_series
from tfdarshan.logs.darshan_log import job_id_from_environment, write_darshan_log
from tfdarshan.steps import series
from tfdarshan.tf import xplane
from tfdarshan.tf.steps import StepSeries

logger = logging.getLogger("tfdarshan")


def run_directory_name(when: Optional[float] = None) -> str:
    """The name XProf gives a session directory (its start time)."""
    return datetime.datetime.fromtimestamp(when or time.time()).strftime("%Y_%m_%d_%H_%M_%S")


def multi_worker() -> bool:
    try:
        cfg = json.loads(os.environ.get("TF_CONFIG", "") or "{}")
        return sum(len(v) for v in (cfg.get("cluster") or {}).values()) > 1
    except (ValueError, AttributeError, TypeError):
        return False


def output_stem(run_dir: pathlib.Path) -> str:
    """<host>.rank<r> for a rank of a launched job, <host>_<pid> when other
    processes share the run directory, else <host>."""
    host = socket.gethostname()
    rank = ranks.detect()
    if rank and not os.environ.get("TFDARSHAN_CHILD"):
        return f"{host}.{rank.stem_suffix}"
    if multi_worker() or os.environ.get("TFDARSHAN_CHILD") or (run_dir / f"{host}.darshan").exists():
        return f"{host}_{os.getpid()}"
    return host


def open_session(logdir: Optional[str], *, label: str, trace: Optional[bool] = None,
                 journal: Optional[pathlib.Path] = None) -> "ProfileSession":
    """The one way a driver (tf.profiler, Keras, `profile()`, `tfdarshan
    run`) opens a profiling session: a window on the process's recorder.
    With `journal`, its step series is also journaled there as it grows
    (logs/live_series.py), for a process that may be killed."""
    return ProfileSession(RECORDER, logdir, trace=trace, label=label).start(journal)


def close_session(session: "ProfileSession", run_dir: Optional[pathlib.Path] = None, *,
                  job: Optional[str] = None) -> Dict[str, pathlib.Path]:
    """Close a session's window and, given a run directory, write its files
    there (else into a fallback directory: see write_or_fall_back)."""
    session.stop()
    return write_or_fall_back(session, run_dir, job=job) if run_dir is not None else {}


class ProfileSession:
    """Open with start(); stop() closes the window and returns its Snapshot."""

    def __init__(self, recorder, logdir: Optional[str], *, trace: Optional[bool] = None, label: str = "profile"):
        self._rec = recorder
        self.logdir = pathlib.Path(logdir) if logdir else None
        # profiling sessions keep the per-operation trace unless told not to
        self.trace = (os.environ.get("TFDARSHAN_TRACE", "1") not in ("0", "")) if trace is None else trace
        self._trace_switched = False
        self.label = label
        self.window = None
        self.series: Optional[StepSeries] = None
        self.started_wall = None
        self.attached_here = False
        self.snapshot: Optional[Snapshot] = None
        self.closed = False
        self.journal: Optional[live_series.Journal] = None

    @classmethod
    def of_window(cls, recorder, snapshot: Snapshot, steps: pd.DataFrame, step_files: pd.DataFrame, *,
                  label: str) -> "ProfileSession":
        """A closed session made from a window cut elsewhere (the flight
        recorder's ring), ready to write()."""
        s = cls(recorder, None, trace=False, label=label)
        s.snapshot, s.steps, s.step_files, s.closed = snapshot, steps, step_files, True
        return s

    def start(self, journal: Optional[pathlib.Path] = None) -> "ProfileSession":
        self.started_wall = time.time()
        try:
            if not _native.is_attached():
                self.attached_here = self._rec.attach()
            settings = self._rec.settings
            if self.trace and not (settings and settings.trace):
                # on for this window only, within the configured budget
                # (TFDARSHAN_TRACE_MEMORY); an attach(trace=True) keeps its own
                self._rec.set_trace(True, settings.trace_memory if settings else config.DEFAULT_TRACE_MEMORY)
                self._trace_switched = True
            self.window = self._rec.open_window()
            if journal is not None:
                # the window starts where its first snapshot ends
                clock = self._rec.clock
                start = int(clock.origin_ticks + self.window.start.end * clock.ticks_per_second)
                self.journal = _journal(journal, start, clock)
            self.series = StepSeries(self._rec, journal=self.journal)
        except BaseException:
            self.cancel()           # nothing half-started is left behind
            raise
        return self

    def stop(self) -> Snapshot:
        self.closed = True
        try:
            snap = self.window.close()
        finally:
            self.series.finish()
            if self._trace_switched and not self._rec._windows:
                self._rec.set_trace(False, 0)
            if self.attached_here:
                self._rec.detach()
        steps, files = self.series.frames(self._window_start_ticks(snap))
        self.snapshot = snap
        self.steps, self.step_files = steps, files
        return snap

    def cancel(self) -> None:
        """Close without writing (the profiler failed or discarded its data)."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.window is not None:
                self.window.close()
        finally:
            if self.series is not None:
                self.series.cancel()
            if self.journal is not None:
                self.journal.close()
            if self.attached_here:
                self._rec.detach()

    def _window_start_ticks(self, snap: Snapshot) -> int:
        clock = self._rec._clock
        return int(clock.origin_ticks + snap.start * clock.ticks_per_second)

    # -------------------------------------------------------------- output
    def write(self, run_dir: pathlib.Path, *, metadata: Optional[Dict[str, str]] = None,
              stem: Optional[str] = None, xplane_path: Optional[pathlib.Path] = None) -> Dict[str, pathlib.Path]:
        """Write the window's files into run_dir (created if needed), named
        <stem>.* (default: output_stem), merging I/O lines into `xplane_path`
        (default: <run_dir>/<host>.xplane.pb when it exists)."""
        run_dir.mkdir(parents=True, exist_ok=True)
        stem = stem or output_stem(run_dir)
        out: Dict[str, pathlib.Path] = {}
        snap = self.snapshot
        meta = {"steps": _step_range(self.steps), "source": self.label}
        cov = (snap.meta.get("coverage") or {}).get("share")
        if cov is not None:
            meta["coverage"] = f"{cov:.4f}"
        tf_version = _tensorflow_version()
        if tf_version:
            meta["tensorflow"] = tf_version
        rank = None if os.environ.get("TFDARSHAN_CHILD") else ranks.detect()
        if rank:
            meta.update(rank=str(rank.rank), world_size=str(rank.size), job=rank.job, launcher=rank.launcher)
        meta.update(cores.metadata())           # whether its node's ranks had a core each
        meta.update(metadata or {})
        if snap.meta.get("served"):
            s = served.summary(snap.meta["served"])
            meta.update(served_from=s["served_from"] or "", served_opens=str(s["opens"]),
                        served_bytes=str(s["bytes"]))
        with _native.suppressed():
            mts = [M.Mount(p, t) for p, t in snap.meta.get("mounts") or []] or M.current()
            files = series.with_paths(self.step_files, snap, mts)
            # a file served from its staged copy throughout was read on the copy's mount
            copies = served.frame(snap.meta.get("served"))
            copies = copies[copies["throughout"]]
            if len(copies):
                on_copy = files["path"].map(dict(zip(copies["path"], copies["served_from"])))
                files["mount"] = on_copy.where(on_copy.notna(), files["mount"]).astype(object)
            if snap.meta.get("coverage"):
                out["coverage"] = run_dir / f"{stem}.coverage.json"
                out["coverage"].write_text(json.dumps(snap.meta["coverage"]))
            out["steps"] = series.write_parquet(self.steps, run_dir / f"{stem}.steps.parquet")
            out["step_files"] = series.write_parquet(files, run_dir / f"{stem}.step_files.parquet")
            xp = xplane_path or run_dir / f"{socket.gethostname()}.xplane.pb"
            if xp.exists() and len(snap.dxt):
                try:
                    xplane.merge_io(xp, snap)
                    out["xplane"] = xp
                except Exception as e:   # the profile itself must survive our failure
                    logger.warning("tfdarshan: could not add I/O to %s: %s", xp, e)
            served_path = served.write_beside(snap.meta.get("served"), run_dir / f"{stem}.darshan")
            if served_path:
                out["served"] = served_path
            # the log last: whoever waits for a session's .darshan finds the rest written.
            # One process's log: its records are rank 0 of nprocs 1 (Darshan's
            # tools abort on a rank past nprocs); its rank in the job is in the metadata
            out["darshan"] = write_darshan_log(snap, run_dir / f"{stem}.darshan", metadata=meta)
        return out


def _journal(path: pathlib.Path, window_start_ticks: int, clock) -> Optional[live_series.Journal]:
    """The step journal at `path`, or None (said on stderr) when it cannot be made."""
    try:
        with _native.suppressed():
            return live_series.Journal(path, window_start_ticks=window_start_ticks,
                                       ticks_per_second=clock.ticks_per_second)
    except OSError as e:
        print(f"tfdarshan: no step journal at {path} ({e.strerror or e}): a killed process will leave its "
              f"counters without their step series", file=sys.stderr)
        return None


def start_live_log(run_dir: pathlib.Path, source: str):
    """This process's live log (capture/live.py) in run_dir, named as its
    log will be, with what a log of it needs (rank, job, program); None when
    one runs already or it cannot be made."""
    run_dir.mkdir(parents=True, exist_ok=True)
    meta = {"source": source}
    rank = None if os.environ.get("TFDARSHAN_CHILD") else ranks.detect()
    if rank:
        meta.update(rank=str(rank.rank), world_size=str(rank.size), job=rank.job, launcher=rank.launcher)
    meta.update(cores.metadata())
    identity = {"metadata": meta, "jobid": job_id_from_environment(), "exe": " ".join(sys.argv) or sys.executable,
                "mounts": [[m.point, m.fstype] for m in M.current()]}
    return live.start(run_dir / f"{output_stem(run_dir)}{live.SUFFIX}", identity)


OUTPUT_SUFFIXES = (".darshan", ".steps.parquet", ".step_files.parquet", ".coverage.json", served.SIDE_SUFFIX)


def write_or_fall_back(session: "ProfileSession", run_dir: pathlib.Path, *, job: Optional[str] = None,
                       metadata: Optional[Dict[str, str]] = None) -> Dict[str, pathlib.Path]:
    """session.write(run_dir); when that fails (a full disk, a directory gone
    read-only), what it left is removed and the files go to a fallback
    directory (logs/destination.py), named in one line on stderr. Raises the
    first error when no fallback takes them either."""
    stem = output_stem(run_dir)
    before = {s: (run_dir / f"{stem}{s}").exists() for s in OUTPUT_SUFFIXES}
    try:
        return session.write(run_dir, metadata=metadata, stem=stem)
    except (OSError, TfdarshanError) as first:
        for suffix, existed in before.items():
            if not existed:
                _remove(run_dir / f"{stem}{suffix}")
        fallback = destination.fallback_directory(run_dir.name, job)
        if fallback is None:
            raise
        try:
            out = session.write(fallback, metadata=metadata, stem=stem)
        except (OSError, TfdarshanError):
            raise first from None
        print(f"tfdarshan: could not write into {run_dir} ({_reason(first)}); wrote the logs to {fallback} "
              f"instead", file=sys.stderr)
        out["fallback"] = fallback
        return out


def _reason(e: Exception) -> str:
    return e.strerror if isinstance(e, OSError) and e.strerror else str(e)


def _remove(path: pathlib.Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _step_range(steps: pd.DataFrame) -> str:
    real = steps[steps["step"] >= 0]["step"] if len(steps) else []
    return f"{int(min(real))}:{int(max(real))}" if len(real) else "window"


def _tensorflow_version() -> Optional[str]:
    tf = sys.modules.get("tensorflow")
    return getattr(tf, "__version__", None) if tf else None
