"""`tfdarshan recommend`'s answers, assembled from what the user named: the
advice for a log or a session (advise), a plan per node (per_node), the
staging manifests that go with them, and a staged run checked against its
baseline (compare). The CLI (cli/recommend.py) only parses, calls one of
these and prints or writes what they return.

The analysis tables a session of several ranks needs (its rank findings,
its per-node plans) are handed in as a function of the session directory,
`rank_tables`, so that advice never imports the analysis (the CLI passes
analysis.analyze's); it answers None for a session of too few ranks."""
from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd

from tfdarshan.advice import advisor, findings as F, job_time
from tfdarshan.advice import tiers as T
from tfdarshan.advice.findings import Finding
from tfdarshan.errors import TfdarshanError

Say = Callable[[str], None]             # a line for the user (standard error), without the command's name
RankTables = Callable[[pathlib.Path], Optional[Dict[str, pd.DataFrame]]]


def quiet(line: str) -> None:
    pass


# ------------------------------------------------------------------ sources
@dataclasses.dataclass
class Source:
    """A log or a session as recommend reads it (session fields None for a log)."""
    snap: object                        # the Snapshot
    steps: Optional[pd.DataFrame] = None
    session_dir: Optional[pathlib.Path] = None
    picked: Optional[str] = None        # which session, in words
    step_files: Optional[pd.DataFrame] = None
    session: object = None              # the logdir Session


def load_source(source: str, session: str = None, say: Say = quiet) -> Source:
    """A Darshan log, a log directory (its newest session, or `session`) or a
    session directory; killed processes' live logs become partial logs first."""
    from tfdarshan.logs.darshan_log import read_darshan_log
    from tfdarshan.logs import skipping
    from tfdarshan.logs.logdir import load_snapshot, load_steps, pick_session, session_at
    path = pathlib.Path(source)
    if path.is_dir():
        recover_dead(path, say)
        here = None if session else session_at(path)
        s, count = (here, 1) if here else pick_session(path, session)
        others = f"; the newest of {count}, --session picks another" if count > 1 else ""
        read = {}                           # each step-series file read once, for both
        snap = load_snapshot(s, read=read)
        skipped = snap.meta["skipped_logs"]
        picked = (f"run {s.run}, session {s.name} ({len(s.hosts)} process"
                  f"{'es' if len(s.hosts) != 1 else ''}{others}"
                  f"{f'; {len(skipped)} unreadable log skipped' if skipped else ''})")
        if skipped:
            say(skipping.warning_line(skipped))
        steps, step_files = load_steps(s, skipped=skipped, read=read)
        return Source(snap, with_origins(steps, s), s.directory, picked, step_files, s)
    if session:
        raise TfdarshanError(f"--session {session}: {path} is a log, not a log directory")
    return Source(read_darshan_log(path))


def recover_dead(directory, say: Say = quiet) -> None:
    """Processes killed before writing their logs: their live logs become
    partial logs first, so the advice counts them (said in one line)."""
    from tfdarshan.logs import live_log
    line = live_log.summary_line(live_log.recover_all(directory))
    if line:
        say(line)


def with_origins(steps, session):
    """The step series with each host's log start (job_time.ORIGIN): whether
    ranks ran in lockstep is read from when their steps ended."""
    from tfdarshan.logs.darshan_reader import read_job_record
    if steps is None or not len(steps) or "host" not in steps:
        return steps
    origin = {}
    for host in steps["host"].unique():
        try:
            origin[host] = float(read_job_record(session.directory / f"{host}.darshan")["start"])
        except (TfdarshanError, OSError, KeyError, TypeError, ValueError):
            return steps                    # one unknown clock: no clock for any
    return steps.assign(**{job_time.ORIGIN: steps["host"].map(origin).astype(float)})


def fast_tier(path: str, toml_files, say: Say = quiet) -> T.Tier:
    """The named directory's tier: declared, stored from a probe of its own
    file system, or probed now (never the figures of an enclosing mount)."""
    known = T.load(toml_files)
    real = os.path.realpath(path)
    tier = T.tier_for(real, known) or T.tier_for(os.path.abspath(path), known)
    if tier is None:
        say(f"probing {path} (no figures stored for it yet)")
        tier = T.probe(path, size=16 << 20)
        T.save_probe(tier)
    return tier


def capacity_of(spec, snap, tier: T.Tier) -> int:
    """The room to plan with, in bytes, for a capacity given as ("bytes", n)
    or ("share", fraction of the data read), or None: the tier's free space."""
    if spec is None:
        if tier.capacity is None:
            raise TfdarshanError("the fast tier's capacity is unknown: give --capacity")
        return tier.capacity
    kind, value = spec
    if kind == "share":
        return int(int(advisor.file_costs(snap, tier)["size"].sum()) * value)
    return value


# ------------------------------------------------------------------- advice
@dataclasses.dataclass
class Recommendation:
    advice: advisor.Advice
    source: Source


def advise(source: str, fast_path: str, *, capacity=None, toml_files: Sequence[str] = (),
           granularity: str = "file", globs: Sequence[str] = (), session: Optional[str] = None,
           objective: Optional[str] = None, rank_tables: Optional[RankTables] = None,
           say: Say = quiet) -> Recommendation:
    """The advice for a log or a session: the advisor's plan and findings,
    the logs it could not read or read partial as findings, a session of
    several ranks planned in job time (objective: "critical-path", its
    default, or "total"), and its rank findings from rank_tables."""
    src = load_source(source, session, say)
    snap, steps, step_files, sess = src.snap, src.steps, src.step_files, src.session
    tier = fast_tier(fast_path, toml_files, say)
    cap = capacity_of(capacity, snap, tier)
    # the known tiers price what no call measured (reads through mmap)
    advice = advisor.recommend(snap, tier, cap, granularity=granularity, globs=globs, steps=steps,
                               step_files=step_files, source=str(source), tiers=T.load(toml_files))
    skipped = snap.meta.get("skipped_logs") or ()
    if skipped:
        advice.findings.append(F.skipped_logs(skipped, snap.meta.get("processes", 1)))
    partial = partial_logs(sess, skipped) if sess is not None else []
    if partial:
        advice.findings.append(F.partial_logs(partial, len(sess.hosts)))
    ranked = sess is not None and sum(".rank" in h for h in sess.hosts) > 1
    if objective == "critical-path" and not ranked:
        raise TfdarshanError("--objective critical-path plans for a session of several ranks; this one has one "
                             "process (its plan is the total one)")
    if ranked and granularity == "file":
        if step_files is None or not len(step_files):
            steps, step_files = window_series(sess)
        job_plans(advice, steps, step_files, objective or "critical-path", partial, cores_per_node(sess))
    if src.session_dir is not None and rank_tables is not None:
        advice.findings.extend(rank_findings(rank_tables(src.session_dir), toml_files))
    return Recommendation(advice, src)


def rank_findings(tables: Optional[Dict[str, pd.DataFrame]], toml_files, per_node: bool = False) -> List[Finding]:
    """Stragglers, hot spot, imbalance and storms, for a session of several
    ranks (none without its tables)."""
    from tfdarshan.advice import distributed
    if tables is None:
        return []
    return distributed.rank_findings(tables, T.load(toml_files), per_node=per_node)


def window_series(session):
    """Without step series (imported logs): each rank's window as its one
    training step, from its own log, in the step series' columns (no wall
    time measure: its wait is the summed time capped at the window)."""
    from tfdarshan.logs.logdir import load_snapshot
    steps, files = [], []
    for host in session.hosts:
        snap = load_snapshot(session, host)
        p = snap.posix
        steps.append({"step": 0, "host": host, "start": snap.start, "end": snap.end,
                      "read_time": float(p["POSIX_F_READ_TIME"].sum()),
                      "meta_time": float(p["POSIX_F_META_TIME"].sum())})
        files.append(pd.DataFrame({"step": 0, "host": host, "module": "POSIX", "path": p["path"],
                                   "opens": p["POSIX_OPENS"], "stats": p["POSIX_STATS"], "reads": p["POSIX_READS"]}))
    return (pd.DataFrame(steps), pd.concat(files, ignore_index=True)) if steps else (None, None)


def cores_per_node(session) -> List[Dict]:
    from tfdarshan.logs.logdir import cores_per_node as of_session
    return of_session(session)


def job_plans(advice: advisor.Advice, steps, step_files, objective: str, partial=(), nodes=()) -> None:
    """A multi-rank session: the critical-path plan and the rules' plans in
    job time (critical_path.py, job_time.py), the objective's staged; ranks
    whose logs are partial are in, and named; nodes (cores_per_node) that
    ran more ranks than cores are named with what that does to the prediction."""
    from tfdarshan.advice import critical_path as CP
    if step_files is None or step_files.empty or steps is None or steps.empty:
        return
    costs = advice.costs
    stageable = (costs["training_input"] & ~costs["on_fast_tier"]).to_numpy(bool) \
        & (costs["size"].to_numpy(np.int64) <= advice.capacity)
    jm = job_time.model(costs, steps, step_files, job_time.candidates_of(costs, stageable))
    if jm is None:
        return
    rules = {"total": advice.chosen, **advice.baselines}
    plans = CP.plan(costs, jm, stageable, advice.capacity, rules, objective)
    advice.chosen = plans.pop("chosen")
    plans["report"] = CP.report(plans)
    if partial:
        plans["partial_ranks"] = [p["label"] for p in partial]
        plans["report"] += (f" {_names(partial)} {'is' if len(partial) == 1 else 'are'} counted as far as "
                            f"recorded (partial: killed before writing {'its' if len(partial) == 1 else 'their'} "
                            f"log{'s' if len(partial) > 1 else ''}).")
    crowded = job_time.shared_cores(nodes)
    if crowded:
        plans["model"]["shared_cores"] = crowded
        plans["report"] += "\n" + job_time.shared_cores_line(crowded)
    advice.plans = plans
    advice.job = {"model": plans["model"], "savings": {"chosen": plans["job_saving"],
                                                        **{k: v["job_saving"] for k, v in plans["rules"].items()}}}


def _names(partial) -> str:
    labels = [p["label"] for p in partial]
    return ", ".join(labels[:8]) + (f" and {len(labels) - 8} more" if len(labels) > 8 else "")


def partial_logs(session, skipped=()):
    """The session's partial logs (logdir.partial_logs), less the unreadable ones."""
    from tfdarshan.logs.logdir import partial_logs as of_session
    left_out = {s["log"] for s in skipped}
    return [p for p in of_session(session) if f"{p['log']}.darshan" not in left_out]


def staging_manifest(rec: Recommendation, root: str, *, progress: bool = False) -> Dict:
    """The manifest that stages the advice's choice under `root`, with the
    prediction for what it stages (not for files gone since the run)."""
    from tfdarshan.advice.manifest import make_manifest
    advice = rec.advice
    chosen = [advice.costs["path"].iat[i] for i in advice.chosen]
    manifest = make_manifest(chosen, root, progress=progress)
    gone = set(manifest["vanished"])
    kept = np.array([i for i in advice.chosen if os.path.abspath(advice.costs["path"].iat[i]) not in gone],
                    dtype=np.int64)
    session_dir = rec.source.session_dir
    manifest["advice"] = {"predicted_saving": advice.saving(kept), "source": advice.source,
                          "session": str(session_dir) if session_dir is not None else None,
                          "predicted_job_saving": advice.job_saving,
                          "job_model": (advice.job or {}).get("model")}
    return manifest


# ----------------------------------------------------------------- per node
def per_node(source: str, fast_path: str, *, capacity=None, toml_files: Sequence[str] = (),
             session: Optional[str] = None, tables: Callable[[pathlib.Path], Dict[str, pd.DataFrame]],
             say: Say = quiet) -> Tuple:
    """(plans, findings, session): a plan per host of the session's rank
    table (advice/per_node.py; `tables` gives a session directory's analysis
    tables) and the rank findings that go with them."""
    from tfdarshan.advice import per_node as P
    from tfdarshan.logs.logdir import load_snapshot, pick_session, session_at
    if not os.path.isdir(source):
        raise TfdarshanError(f"--per-node: {source} is a log; give the log directory of a multi-rank session")
    recover_dead(source, say)
    sess = (None if session else session_at(source)) or pick_session(source, session)[0]
    found = tables(sess.directory)
    ranks = found["ranks"]
    tier = fast_tier(fast_path, toml_files, say)
    snaps, caps = {}, {}
    for host, g in ranks.groupby("host"):
        snaps[host] = load_snapshot(sess, stems=list(g["log"]))
        caps[host] = capacity_of(capacity, snaps[host], tier)
    plans = P.plan(snaps, tier, caps, ranks.groupby("host").size().to_dict())
    return plans, rank_findings(found, toml_files, per_node=True), sess


def node_manifest(plans, root: str, source: str, session_dir, *, progress: bool = False) -> Dict:
    """One manifest with a part per node (`tfdarshan stage --node`), with the
    prediction for what it stages (not for files gone since the run)."""
    from tfdarshan.advice.manifest import make_node_manifest
    manifest = make_node_manifest({h: plans.paths(h) for h in plans.nodes}, root, progress=progress)
    gone = set(manifest["vanished"])
    savings = {h: plans.saving(h, without=gone) for h in plans.nodes}
    manifest["advice"] = {"predicted_saving": sum(savings.values()), "source": str(source),
                          "session": str(session_dir), "node_savings": savings}
    return manifest


# ------------------------------------------------------------------ compare
def compare(before: str, after: str, *, manifest: Optional[str] = None, session: Optional[str] = None,
            say: Say = quiet) -> Dict:
    """A run before staging against one after it (compare.py): step,
    training and window time, the job time against the plan's prediction,
    and the staged files' I/O time against the prediction."""
    from tfdarshan.advice.compare import compare_job, compare_runs, compare_wall, wall_times
    from tfdarshan.advice.stager import load_manifest, staged_manifest_of
    b = load_source(before, session, say)
    a = load_source(after, None, say)
    m = load_manifest(manifest) if manifest else staged_manifest_of(b.session_dir, before)
    mapping = {e["source"]: e["destination"] for e in m["entries"]}
    advice = m.get("advice") or {}
    r = compare_runs(b.snap, a.snap, mapping, advice.get("predicted_saving"))
    r["wall"] = compare_wall(wall_times(b.snap, b.steps), wall_times(a.snap, a.steps))
    model = advice.get("job_model") or {}
    r["job"] = compare_job(b.steps, a.steps, advice.get("predicted_job_saving"), model.get("mode"),
                           model.get("shared_cores"))
    return r
