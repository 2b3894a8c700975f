"""Whole-run profiling: the engine behind `tfdarshan run` and the automatic
start in child processes. Files are written once, however the process ends
(normal exit, uncaught exception, SIGTERM, os._exit).

Until its log is written, a process keeps its counters (capture/live.py) and
its step series (logs/live_series.py) current on disk at every collect, so
a SIGKILL at any moment leaves them up to its last collect.

SIGTERM (a launcher aborting a job: Open MPI's mpirun sends SIGKILL 1 s
later, Slurm after KillWait) is answered on a thread of its own: one last
collect, the log written, then the process ends at once, as SIGTERM would
have ended it without tfdarshan (exit status 128 + 15), its interpreter's
slow teardown skipped. The thread is woken through Python's signal wake-up
file descriptor, so this works while the main thread is blocked in C (an
MPI collective waiting for a dead rank, a TensorFlow op), where a Python
signal handler would never run."""
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
from tfdarshan.logs import darshan_format, jobdir, joblog, live_series
from tfdarshan.logs.darshan_log import write_darshan_log
from tfdarshan.logs.logdir import session_root
from tfdarshan.measures.human import count
from tfdarshan.steps import series
from tfdarshan.tf import flight_recorder, session as session_mod, steps as S

logger = logging.getLogger("tfdarshan")
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
            # one session a run, shared by its ranks (logs/jobdir.py)
            self.run_dir = jobdir.job_directory(profile_root, self.rank, session_mod.run_directory_name)
        else:
            self.run_dir = jobdir.new_session_directory(profile_root, session_mod.run_directory_name)
        self.session = None
        self.live = None
        self.pid = os.getpid()
        self._done = False
        self._finished = threading.Event()
        self._finisher: Optional[threading.Thread] = None
        self._lock = threading.Lock()
        self._real_exit = None
        self.signalled: Optional[int] = None     # the signal this process is ending on

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
        try:
            # what the logs are written with, loaded now: a process told to end
            # by its launcher has about a second before SIGKILL
            series.prepare_writer()
            darshan_format.library()
        except Exception as e:   # noqa: BLE001 - the write at the end will say what is wrong
            logger.debug("tfdarshan: could not load the log writers early: %s", e)
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
        # the series journaled beside the live counters, named as they are
        journal = self.live.path.with_name(self.live.path.name[: -len(live.SUFFIX)] + live_series.SUFFIX) \
            if self.live is not None else None
        self.session = session_mod.open_session(str(self.logdir), label="run", trace=self.trace, journal=journal)

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
        global _terminating_run
        # SIGTERM: turn the default "die at once" into "write the log, then die at once"
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None) and \
                threading.current_thread() is threading.main_thread():
            _terminating_run = self
            signal.signal(signal.SIGTERM, _sigterm)
            _watch_signals()
        if self._real_exit is None:
            real = os._exit
            self._real_exit = real

            def _exit(code):
                self.finish()
                real(code)
            _exit.__tfdarshan_original__ = real
            os._exit = _exit

    # --------------------------------------------------------------- finish
    def terminated(self, signum: int) -> None:
        """SIGTERM came (on the signal thread): collect once more, so that the
        live files hold everything up to now, then write the log."""
        if os.getpid() == self.pid and self.live is not None:
            with RECORDER._lock:
                self.live.mark_ended(signum)
                RECORDER.collect()
        self.signalled = signum
        self.finish()

    def finish(self) -> None:
        global _finishing
        # first of all: a SIGTERM from now on (multiprocessing terminates pool
        # workers that are already exiting) must not cut the logs short
        _finishing = True
        with self._lock:
            started = self._done
            self._done = True
            if not started:
                self._finisher = threading.current_thread()
        if started:
            # another thread writes the logs (the SIGTERM thread): the process
            # must not end before they are written
            if threading.current_thread() is not self._finisher:
                self._finished.wait()
            return
        if threading.current_thread() is threading.main_thread():
            # the process is ending: a second SIGTERM must not cut the logs short
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            self._finish()
        finally:
            self._finished.set()

    def _finish(self) -> None:
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
        print(f"tfdarshan: {served.describe(self.staged)}: served none of the {count(_native.staged_loaded(), 'copy', 'copies')} "
              f"this node holds ({why or 'the program opened none of their sources'})", file=sys.stderr)

    def _end_live(self) -> None:
        """The run's log is written (or was never to be): the live files go."""
        if self.session is not None and self.session.journal is not None:
            self.session.journal.close()
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
        elif self.rank and self.signalled:
            # the whole job is being stopped: the job log (all ranks' logs read)
            # would not finish before the launcher's SIGKILL
            print(f"tfdarshan: rank {self.rank.rank} stopped by signal {self.signalled}; run `tfdarshan joblog "
                  f"{self.run_dir}` for the job log", file=sys.stderr)
        elif self.rank:
            stem = out["darshan"].name[: -len(".darshan")]
            try:
                job_log = joblog.rank_finished(self.run_dir, self.rank, stem)
            except (OSError, TfdarshanError) as e:
                print(f"tfdarshan: could not write the job log ({e}); run `tfdarshan joblog {self.run_dir}` "
                      f"later", file=sys.stderr)
                return
            if job_log:
                print(f"tfdarshan: wrote the job log {job_log} ({count(self.rank.size, 'rank')})", file=sys.stderr)

    def _write_child(self) -> None:
        os.environ["TFDARSHAN_CHILD"] = "1"
        snap = RECORDER.snapshot()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log = self.run_dir / f"{session_mod.output_stem(self.run_dir)}.darshan"
        with _native.suppressed():
            served.write_beside(snap.meta.get("served"), log)
            write_darshan_log(snap, log, metadata={"source": "child", "parent_pid": str(self.pid)})


_finishing = False
_terminating_run: Optional[WholeRun] = None      # the run a SIGTERM ends
_signal_thread: Optional[threading.Thread] = None
_signal_lock = threading.Lock()
_wakeup = {"fd": -1, "pid": 0}


def _sigterm(signum, frame):
    """The Python-level handler (runs in the main thread, when it runs
    Python): hand the work to the SIGTERM thread and carry on."""
    _terminate(signum)


def _terminate(signum: int) -> None:
    """Start the SIGTERM thread, once: it writes the logs and ends the process."""
    global _signal_thread
    if _finishing:
        return          # the logs are being written anyway: a second SIGTERM changes nothing
    with _signal_lock:
        if _signal_thread is not None:
            return
        _signal_thread = threading.Thread(target=_end_on_signal, args=(signum,), name="tfdarshan-sigterm")
        _signal_thread.start()


def _end_on_signal(signum: int) -> None:
    run = _terminating_run
    code = 128 + signum
    try:
        if run is not None:
            run.terminated(signum)
    except Exception as e:   # noqa: BLE001 - the process must still end as it was told to
        print(f"tfdarshan: could not write the logs on signal {signum}: {e}", file=sys.stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # noqa: BLE001 - a closed or broken stream: nothing more to say
            pass
    real = getattr(os._exit, "__tfdarshan_original__", os._exit)
    real(code)


def _watch_signals() -> None:
    """Be told of SIGTERM even while the main thread is blocked in C: Python's
    C-level handler writes each signal's number to the wake-up fd at once,
    and a thread of ours reads it. Left alone when the program has a wake-up
    fd of its own (asyncio), and undone in forked children (they share it)."""
    if _wakeup["fd"] >= 0 and _wakeup["pid"] == os.getpid():
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        os.close(r)
        os.close(w)
        return
    if old != -1:
        signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return
    _wakeup.update(fd=w, pid=os.getpid())
    threading.Thread(target=_read_signals, args=(r, w), name="tfdarshan-signals", daemon=True).start()


def _read_signals(r: int, w: int) -> None:
    while True:
        try:
            got = os.read(r, 64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not got:
            return
        if os.getpid() != _wakeup["pid"]:
            return
        if signal.SIGTERM in got and signal.getsignal(signal.SIGTERM) is _sigterm:
            _terminate(signal.SIGTERM)


def _forget_wakeup_in_child() -> None:
    """A forked child shares the pipe: its signals must not reach the parent's thread."""
    global _signal_thread
    _signal_thread = None
    if _wakeup["fd"] >= 0:
        try:
            old = signal.set_wakeup_fd(-1)
            if old != _wakeup["fd"]:
                signal.set_wakeup_fd(old)       # someone else's since: theirs to keep
        except (ValueError, OSError):
            pass
        _wakeup.update(fd=-1, pid=0)


os.register_at_fork(after_in_child=_forget_wakeup_in_child)


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
