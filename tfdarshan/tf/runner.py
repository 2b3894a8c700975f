"""Whole-run profiling: the engine behind `tfdarshan run` and the automatic
start in child processes. Files are written once, however the process ends
(normal exit, uncaught exception, SIGTERM, os._exit)."""
from __future__ import annotations

import atexit
import json
import logging
import os
import pathlib
import signal
import sys
import threading
from typing import Optional, Tuple

from tfdarshan.capture import _native, live, ranks, served
from tfdarshan.capture.recorder import RECORDER
from tfdarshan.errors import TfdarshanError
from tfdarshan.logs import jobdir, joblog
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.logs.logdir import session_root
from tfdarshan.tf import flight_recorder, session as session_mod, steps as S

log = logging.getLogger("tfdarshan")
CONFIG_ENV = "TFDARSHAN_RUN_CONFIG"
AUTOSTART_DIR = pathlib.Path(__file__).parent.parent / "_autostart"


class WholeRun:
    def __init__(self, logdir, *, steps: Optional[Tuple[int, int]] = None, trace: bool = False,
                 children: bool = False, run_dir: Optional[str] = None, flight: Optional[dict] = None,
                 staged: Optional[str] = None):
        self.logdir = pathlib.Path(logdir).resolve()
        # serve staged copies ("all" this node holds, or a manifest's); children inherit it
        self.staged = staged
        self.steps = steps
        self.trace = trace
        self.children = children
        self.flight = flight          # the flight recorder's settings: no whole-run log then
        self.flight_recorder = None
        # the ranks of a launched job share one session directory
        self.rank = None if os.environ.get("TFDARSHAN_CHILD") else ranks.detect()
        profile_root = session_root(self.logdir, beside_xprof=False)
        if run_dir:
            self.run_dir = pathlib.Path(run_dir)
        elif self.rank:
            self.run_dir = jobdir.job_directory(profile_root, self.rank.job, session_mod.run_directory_name)
        else:
            self.run_dir = profile_root / session_mod.run_directory_name()
        self.session = None
        self.live = None
        self.pid = os.getpid()
        self._done = False
        self._lock = threading.Lock()
        self._real_exit = None

    # ---------------------------------------------------------------- start
    def start(self) -> None:
        if self.staged:
            os.environ[served.ENV] = self.staged
        RECORDER.attach(trace=self.trace, staged=self.staged)
        self.staged = RECORDER.settings.staged if RECORDER.settings else self.staged
        if self.staged and not _native.staged_loaded() and os.getpid() == self.pid:
            print(f"tfdarshan: {served.describe(self.staged)}: this node ({served.node()}) holds none of "
                  f"them (`tfdarshan stage` records what it copies); the program reads its sources",
                  file=sys.stderr)
        # counters a SIGKILL cannot take away (a forked child's exit writes its own log instead)
        self.live = session_mod.start_live_log(self.run_dir, "flight recorder" if self.flight is not None else "run")
        if self.children:
            self._export_to_children()
        if self.flight is not None:
            settings = dict(self.flight)
            self.flight_recorder = flight_recorder.start(self.logdir, settings.pop("seconds"), **settings)
        elif self.steps is None:
            self._open()
        else:
            S.observers.append(self._on_step)
        atexit.register(self.finish)
        self._install_exit_hooks()

    def _open(self) -> None:
        self.session = session_mod.open_session(str(self.logdir), label="run", trace=self.trace)

    def _on_step(self, event: str, step: int) -> None:
        first, last = self.steps
        if event == "begin" and step == first and self.session is None:
            self._open()
        elif event == "end" and step >= last and self.session is not None:
            S.observers.remove(self._on_step)
            self._write()

    def _export_to_children(self) -> None:
        os.environ[CONFIG_ENV] = json.dumps({"run_dir": str(self.run_dir), "trace": self.trace})
        paths = [str(AUTOSTART_DIR)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)

    def _install_exit_hooks(self) -> None:
        # SIGTERM: turn the default "die at once" into an exit that writes logs
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None) and \
                threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, _sigterm)
        if self._real_exit is None:
            real = os._exit
            self._real_exit = real

            def _exit(code):
                self.finish()
                real(code)
            _exit.__tfdarshan_original__ = real
            os._exit = _exit

    # --------------------------------------------------------------- finish
    def finish(self) -> None:
        global _finishing
        # first of all: a SIGTERM from now on (multiprocessing terminates pool
        # workers that are already exiting) must not cut the logs short
        _finishing = True
        with self._lock:
            if self._done:
                return
            self._done = True
        if threading.current_thread() is threading.main_thread():
            # the process is ending: a second SIGTERM must not cut the logs short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            if self.staged and os.getpid() == self.pid and not os.environ.get("TFDARSHAN_CHILD"):
                self._say_if_none_served()
            if self.flight_recorder is not None and os.getpid() == self.pid:
                self.flight_recorder.stop()
            if os.getpid() != self.pid:
                self._write_child()       # a forked child: its own records since the fork
            elif self.session is not None and not self.session.closed:
                self._write()       # not again when --steps B already wrote it
            else:
                self._end_live()    # nothing (more) to write: --steps, the flight recorder
        except Exception as e:   # noqa: BLE001 - exit paths must not raise
            # the live log stays: `tfdarshan joblog` / `analyze` turn it into a partial log
            print(f"tfdarshan: could not write the run's logs: {e}", file=sys.stderr)

    def _say_if_none_served(self) -> None:
        """A run asked to serve staged copies that served none says so (its
        exit status stays the program's)."""
        if not _native.staged_loaded():
            return          # said at the start
        s = served.summary(served.process_meta())
        if s["opens"] or s["stats"]:
            return
        why = "; ".join(f"{n} {reason}" for reason, n in s["not_served"].items())
        print(f"tfdarshan: {served.describe(self.staged)}: served none of the {_native.staged_loaded()} copies "
              f"this node holds ({why or 'the program opened none of their sources'})", file=sys.stderr)

    def _end_live(self) -> None:
        """The run's log is written (or was never to be): the live log goes."""
        live.stop(self.live)
        self.live = None
        try:
            self.run_dir.rmdir()      # left empty by a flight recorder that never dumped into it
        except OSError:
            pass

    def _write(self) -> None:
        out = session_mod.close_session(self.session, self.run_dir, job=self.rank.job if self.rank else None)
        self._end_live()
        print(f"tfdarshan: wrote {out['darshan']}", file=sys.stderr)
        if self.rank and "fallback" in out:
            print(f"tfdarshan: rank {self.rank.rank}'s log is not in the job's session directory: copy "
                  f"{out['fallback']}/* into {self.run_dir} and run `tfdarshan joblog {self.run_dir}`", file=sys.stderr)
        elif self.rank:
            stem = out["darshan"].name[: -len(".darshan")]
            try:
                job_log = joblog.rank_finished(self.run_dir, self.rank, stem)
            except (OSError, TfdarshanError) as e:
                print(f"tfdarshan: could not write the job log ({e}); run `tfdarshan joblog {self.run_dir}` "
                      f"later", file=sys.stderr)
                return
            if job_log:
                print(f"tfdarshan: wrote the job log {job_log} ({self.rank.size} ranks)", file=sys.stderr)

    def _write_child(self) -> None:
        os.environ["TFDARSHAN_CHILD"] = "1"
        snap = RECORDER.snapshot()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = self.run_dir / f"{session_mod.output_stem(self.run_dir)}.darshan"
        with _native.suppressed():
            served.write_beside(snap.meta.get("served"), log)
            write_darshan_log(snap, log, metadata={"source": "child", "parent_pid": str(self.pid)})


_finishing = False


def _sigterm(signum, frame):
    if not _finishing:
        raise SystemExit(128 + signum)


def start_child_from_environment() -> Optional[WholeRun]:
    """In a Python child of `tfdarshan run --children`: attach and write this
    process's own log when it exits."""
    cfg = os.environ.get(CONFIG_ENV)
    if not cfg:
        return None
    try:
        c = json.loads(cfg)
        os.environ["TFDARSHAN_CHILD"] = "1"
        run = WholeRun(pathlib.Path(c["run_dir"]).parent.parent.parent, trace=bool(c.get("trace")),
                       run_dir=c["run_dir"])
        run.start()
        return run
    except Exception as e:  # noqa: BLE001 - never break the child
        print(f"tfdarshan: could not attach in child {os.getpid()}: {e}", file=sys.stderr)
        return None
