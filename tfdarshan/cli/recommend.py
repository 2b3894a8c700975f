"""`tfdarshan recommend LOGDIR_OR_LOG --fast-tier PATH`: which data to stage
on the fast tier, what it will save, and why.

The input is a Darshan log (ours or a site Darshan's) or a TensorBoard log
directory (its newest session, or --session). The fast tier's figures come
from `tfdarshan probe` (or a --tiers TOML file); an unknown tier is probed
on the spot. With a log directory the advice is also stored beside the
session, where the TensorBoard tab shows it. --manifest writes the staging
manifest for `tfdarshan stage`.

For a session of several ranks, findings on stragglers, a shared-file hot
spot, shard imbalance and metadata storms come from the session's analysis
tables (built by `tfdarshan analyze` first when absent). `--per-node` plans
what each node (host) copies to its own fast tier from what its ranks read,
with --capacity per node, and compares that with one set replicated on every
node; its manifest has a part per node for `tfdarshan stage --node`.

`--compare BEFORE AFTER` checks an earlier recommendation: predicted versus
achieved saving, from the run before staging and the run after."""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys

from tfdarshan.cli import path_arg
from tfdarshan.errors import TfdarshanError


def add_parser(sub) -> None:
    p = sub.add_parser("recommend", help="what to stage on the fast tier", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", nargs="?", type=path_arg, help="a Darshan log or a TensorBoard log directory")
    p.add_argument("--fast-tier", type=path_arg, help="a directory on the fast tier")
    p.add_argument("--capacity", help="room to plan with, with a unit (4G, 500MiB, 4096B) or as a share of "
                                      "the data read (10%%); default: the tier's free space")
    p.add_argument("--tiers", action="append", default=[], type=path_arg, help="TOML file declaring tiers")
    p.add_argument("--granularity", choices=["file", "dataset"], default="file",
                   help="stage single files (default), or whole datasets (files grouped by --dataset globs, "
                        "else by their shard pattern, such as img_*.jpg) all or nothing")
    p.add_argument("--dataset", action="append", default=[], metavar="GLOB",
                   help="group files matching GLOB into one dataset")
    p.add_argument("--session", help="session name in the log directory (default: newest)")
    p.add_argument("--format", choices=["text", "json", "html"], default="text",
                   help="the report as text (default), JSON, or a self-contained HTML page")
    p.add_argument("--output", type=path_arg, help="write the report here instead of standard output")
    p.add_argument("--manifest", type=path_arg, help="also write the staging manifest here")
    p.add_argument("--staging-root", type=path_arg, help="where copies go (default: FAST_TIER/tfdarshan-staged)")
    p.add_argument("--no-store", action="store_true", help="do not store advice.json beside the session")
    p.add_argument("--per-node", action="store_true",
                   help="a plan per node (host) of a multi-rank session, from its ranks' reads; --capacity is "
                        "per node; compares with one set replicated on every node")
    p.add_argument("--objective", choices=["critical-path", "total"],
                   help="what the plan minimises: the slowest rank's I/O time, step by step (critical-path, the "
                        "default for a session of several ranks: a synchronous step waits for its slowest rank), "
                        "or the I/O time summed over ranks and threads (total, the default for one process)")
    p.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"), type=path_arg,
                   help="a run before staging against one after it: step, training and window time, and the "
                        "staged files' I/O time against the prediction (log directories, session directories "
                        "or logs)")
    p.set_defaults(handler=run)


def load_source(source: str, session: str = None):
    """(snapshot, steps, session directory, which session) for a log, a
    logdir or a session directory (the last two None for a log)."""
    return _load(source, session)[:4]


def _load(source: str, session: str = None):
    """load_source's four, then the step series' per-file rows and the Session."""
    from tfdarshan.logs.darshan_log import read_darshan_log
    from tfdarshan.logs import skipping
    from tfdarshan.logs.logdir import load_snapshot, load_steps, pick_session, session_at
    path = pathlib.Path(source)
    if path.is_dir():
        recover_dead(path)
        here = None if session else session_at(path)
        s, count = (here, 1) if here else pick_session(path, session)
        others = f"; the newest of {count}, --session picks another" if count > 1 else ""
        snap = load_snapshot(s)
        skipped = snap.meta["skipped_logs"]
        picked = (f"run {s.run}, session {s.name} ({len(s.hosts)} process"
                  f"{'es' if len(s.hosts) != 1 else ''}{others}"
                  f"{f'; {len(skipped)} unreadable log skipped' if skipped else ''})")
        if skipped:
            print(f"tfdarshan recommend: {skipping.warning_line(skipped)}", file=sys.stderr)
        steps, step_files = load_steps(s, skipped=skipped)
        return snap, with_origins(steps, s), s.directory, picked, step_files, s
    if session:
        raise TfdarshanError(f"--session {session}: {path} is a log, not a log directory")
    return read_darshan_log(path), None, None, None, None, None


def recover_dead(directory) -> None:
    """Processes killed before writing their logs: their live logs become
    partial logs first, so the advice counts them (said in one line)."""
    from tfdarshan.logs import live_log
    line = live_log.summary_line(live_log.recover_all(directory))
    if line:
        print(f"tfdarshan recommend: {line}", file=sys.stderr)


def with_origins(steps, session):
    """The step series with each host's log start (job_time.ORIGIN): whether
    ranks ran in lockstep is read from when their steps ended."""
    from tfdarshan.advice import job_time
    from tfdarshan.errors import TfdarshanError as Unreadable
    from tfdarshan.logs.darshan_reader import read_job_record
    if steps is None or not len(steps) or "host" not in steps:
        return steps
    origin = {}
    for host in steps["host"].unique():
        try:
            origin[host] = float(read_job_record(session.directory / f"{host}.darshan")["start"])
        except (Unreadable, OSError, KeyError, TypeError, ValueError):
            return steps                    # one unknown clock: no clock for any
    return steps.assign(**{job_time.ORIGIN: steps["host"].map(origin).astype(float)})


def fast_tier(path: str, toml_files):
    """The named directory's tier: declared, stored from a probe of its own
    file system, or probed now (never the figures of an enclosing mount)."""
    from tfdarshan.advice import tiers as T
    known = T.load(toml_files)
    real = os.path.realpath(path)
    tier = T.tier_for(real, known) or T.tier_for(os.path.abspath(path), known)
    if tier is None:
        print(f"tfdarshan recommend: probing {path} (no figures stored for it yet)", file=sys.stderr)
        tier = T.probe(path, size=16 << 20)
        T.save_probe(tier)
    return tier


def parse_capacity(text):
    """--capacity as ("bytes", n) or ("share", fraction), or None when it was
    not given. Checked before anything slow (reading logs, probing a tier)."""
    from tfdarshan.advice import tiers as T
    if text is None:
        return None
    if text.endswith("%"):
        try:
            share = float(text[:-1]) / 100
        except ValueError:
            raise TfdarshanError(f"--capacity {text}: not a percentage") from None
        if not 0 <= share <= 1:      # also NaN and infinities, which int() later cannot take
            raise TfdarshanError(f"--capacity {text}: a percentage is between 0 and 100")
        return ("share", share)
    if text.strip().replace(".", "", 1).isdigit():
        # "10" could mean bytes, GB or a share: say which
        raise TfdarshanError(f"--capacity {text}: give a unit (e.g. {text}G, {text}MiB, {text}B) or a "
                             f"percentage ({text}%)")
    return ("bytes", T.parse_size(text))


def capacity_of(spec, snap, tier) -> int:
    """The room to plan with, in bytes, for a parse_capacity() result."""
    if spec is None:
        if tier.capacity is None:
            raise TfdarshanError("the fast tier's capacity is unknown: give --capacity")
        return tier.capacity
    kind, value = spec
    if kind == "share":
        from tfdarshan.advice.advisor import file_costs
        return int(int(file_costs(snap, tier)["size"].sum()) * value)
    return value


def run(args: argparse.Namespace) -> int:
    if args.compare:
        return compare(args)
    if not args.source or not args.fast_tier:
        raise TfdarshanError("give a log or log directory and --fast-tier PATH")
    if not os.path.isdir(args.fast_tier):
        raise TfdarshanError(f"--fast-tier {args.fast_tier}: not a directory")
    capacity = parse_capacity(args.capacity)
    if args.per_node:
        return per_node(args, capacity)
    from tfdarshan.advice import render as advice_report, advisor
    import numpy as np
    from tfdarshan.advice.stager import make_manifest, vanished_line
    snap, steps, session_dir, picked, step_files, session = _load(args.source, args.session)
    tier = fast_tier(args.fast_tier, args.tiers)
    cap = capacity_of(capacity, snap, tier)
    # the known tiers price what no call measured (reads through mmap)
    from tfdarshan.advice import tiers as T
    advice = advisor.recommend(snap, tier, cap, granularity=args.granularity, globs=args.dataset,
                               steps=steps, step_files=step_files, source=str(args.source),
                               tiers=T.load(args.tiers))
    if snap.meta.get("skipped_logs"):
        advice.findings.append(skipped_finding(snap.meta["skipped_logs"], snap.meta.get("processes", 1)))
    partial = partial_logs(session, snap.meta.get("skipped_logs") or ()) if session is not None else []
    if partial:
        advice.findings.append(partial_finding(partial, len(session.hosts)))
    ranked = session is not None and sum(".rank" in h for h in session.hosts) > 1
    if args.objective == "critical-path" and not ranked:
        raise TfdarshanError("--objective critical-path plans for a session of several ranks; this one has one "
                             "process (its plan is the total one)")
    if ranked and args.granularity == "file":
        if step_files is None or not len(step_files):
            steps, step_files = window_series(session)
        job_plans(advice, steps, step_files, args.objective or "critical-path", partial)
    if session_dir is not None:
        advice.findings.extend(rank_findings(session_dir, args.tiers))
    text = {"text": advice_report.render_text, "json": advice_report.render_json,
            "html": advice_report.render_html}[args.format](advice)
    emit(args, text)
    if session_dir is not None and not args.no_store:
        from tfdarshan.advice.stager import _write_json
        _write_json(session_dir / "advice.json", advice.to_dict())
    if args.manifest:
        root = args.staging_root or os.path.join(args.fast_tier, "tfdarshan-staged")
        chosen = [advice.costs["path"].iat[i] for i in advice.chosen]
        manifest = make_manifest(chosen, root, progress=sys.stderr.isatty())
        # the prediction is the saving of what the manifest stages: not of files gone since the run
        gone = set(manifest["vanished"])
        kept = np.array([i for i in advice.chosen if os.path.abspath(advice.costs["path"].iat[i]) not in gone],
                        dtype=np.int64)
        manifest["advice"] = {"predicted_saving": advice.saving(kept), "source": str(args.source),
                              "session": str(session_dir) if session_dir is not None else None,
                              "predicted_job_saving": advice.job_saving,
                              "job_model": (advice.job or {}).get("model")}
        pathlib.Path(args.manifest).write_text(json.dumps(manifest, indent=1))
        if gone:
            print(f"tfdarshan recommend: {vanished_line(manifest)}", file=sys.stderr)
        print(f"wrote the staging manifest {args.manifest} ({len(manifest['entries'])} files)", file=sys.stderr)
    if picked:
        print(f"tfdarshan recommend: read {picked}", file=sys.stderr)
    return 0


def window_series(session):
    """Without step series (imported logs): each rank's window as its one
    training step, from its own log, in the step series' columns (no wall
    time measure: its wait is the summed time capped at the window)."""
    import pandas as pd
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


def job_plans(advice, steps, step_files, objective: str, partial=()) -> None:
    """A multi-rank session: the critical-path plan and the rules' plans in
    job time (critical_path.py, job_time.py), the objective's staged; ranks
    whose logs are partial are in, and named."""
    import numpy as np
    from tfdarshan.advice import critical_path as CP, job_time
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


def partial_finding(partial, processes: int):
    """The logs made from what a killed process had recorded, as a finding:
    they are counted, as far as they go."""
    from tfdarshan.advice.advisor import Finding
    n = len(partial)
    return Finding("WARN", f"{n} of {processes} log{'s' if processes > 1 else ''} partial: "
                           f"{'a process' if n == 1 else 'processes'} killed before writing {'its' if n == 1 else 'their'} "
                           f"log{'s' if n > 1 else ''}",
                   "; ".join(f"{p['label']} {p['reason']}"
                                                      + (f" (last collect {p['last_collect']})" if p["last_collect"] else "")
                                                      for p in partial[:8]) + ". Their files, bytes and steps are "
                   "counted up to then; what they did after is not.",
                   "Give the job time to end (Slurm's KillWait, mpirun's odls_base_sigkill_timeout) or find why it "
                   "was killed (OOM, time limit, a failed rank); rerun to see the whole job.",
                   {"partial_logs": list(partial)})


def emit(args: argparse.Namespace, text: str) -> None:
    """The report to --output, else standard output."""
    if args.output:
        pathlib.Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    else:
        print(text)


def skipped_finding(skipped, read: int):
    """The logs left out of the advice, as a finding every format shows."""
    from tfdarshan.advice.advisor import Finding
    from tfdarshan.logs import skipping
    n = len(skipped)
    return Finding("WARN", f"{n} unreadable log{'s' if n > 1 else ''} left out",
                   f"The advice covers the {read} readable log{'s' if read > 1 else ''} of the session; "
                   + skipping.warning_line(skipped)[len("warning: "):] + ".",
                   "Look at why the process did not finish its log (killed, disk full); rerun it to include it.",
                   {"skipped_logs": list(skipped)})


def rank_findings(session_dir, toml_files, per_node: bool = False):
    """Stragglers, hot spot, imbalance and storms, for a session of several ranks."""
    from tfdarshan.advice import distributed, tiers as T
    from tfdarshan.analysis.analyze import rank_logs, tables_of
    if len(rank_logs(session_dir)) < distributed.MIN_RANKS:
        return []
    return distributed.rank_findings(tables_of(session_dir), T.load(toml_files), per_node=per_node)


def per_node(args: argparse.Namespace, capacity) -> int:
    """A plan per host of the session's rank table, and the manifest with a part per node."""
    from tfdarshan.advice import per_node as P, render as advice_report
    from tfdarshan.advice.stager import make_node_manifest, vanished_line
    from tfdarshan.analysis.analyze import tables_of
    from tfdarshan.logs.logdir import load_snapshot, pick_session, session_at
    if not os.path.isdir(args.source):
        raise TfdarshanError(f"--per-node: {args.source} is a log; give the log directory of a multi-rank session")
    if args.format == "html":
        raise TfdarshanError("--per-node reports as text or json")
    recover_dead(args.source)
    session = (None if args.session else session_at(args.source)) or pick_session(args.source, args.session)[0]
    ranks = tables_of(session.directory)["ranks"]
    tier = fast_tier(args.fast_tier, args.tiers)
    snaps, caps = {}, {}
    for host, g in ranks.groupby("host"):
        snaps[host] = load_snapshot(session, stems=list(g["log"]))
        caps[host] = capacity_of(capacity, snaps[host], tier)
    plans = P.plan(snaps, tier, caps, ranks.groupby("host").size().to_dict())
    findings = rank_findings(session.directory, args.tiers, per_node=True)
    if args.format == "json":
        import dataclasses
        text = json.dumps({**plans.to_dict(), "findings": [dataclasses.asdict(f) for f in findings]}, indent=1)
    else:
        text = advice_report.render_node_plans(plans, findings)
    emit(args, text)
    if args.manifest:
        root = args.staging_root or os.path.join(args.fast_tier, "tfdarshan-staged")
        manifest = make_node_manifest({h: plans.paths(h) for h in plans.nodes}, root, progress=sys.stderr.isatty())
        if manifest["vanished"]:
            print(f"tfdarshan recommend: {vanished_line(manifest)}", file=sys.stderr)
        manifest["advice"] = {"predicted_saving": plans.sharded_total, "source": str(args.source),
                              "session": str(session.directory),
                              "node_savings": {h: plans.saving(h) for h in plans.nodes}}
        pathlib.Path(args.manifest).write_text(json.dumps(manifest, indent=1))
        print(f"wrote the staging manifest {args.manifest} ({len(manifest['entries'])} files for "
              f"{len(plans.nodes)} nodes; each node runs `tfdarshan stage {args.manifest}`)", file=sys.stderr)
    return 0


def compare(args: argparse.Namespace) -> int:
    """A run before staging against one after it: step, training and
    window time first, then the staged files' I/O time against the
    prediction. Exit 2 when AFTER read none of the staged copies, 1 when it
    read some files from their sources instead."""
    from tfdarshan.advice.compare import compare_job, compare_runs, compare_wall, wall_times
    from tfdarshan.advice.stager import load_manifest, staged_manifest_of
    before, steps_before, before_dir, _ = load_source(args.compare[0], args.session)
    after, steps_after, _, _ = load_source(args.compare[1])
    m = load_manifest(args.manifest) if args.manifest else staged_manifest_of(before_dir, args.compare[0])
    mapping = {e["source"]: e["destination"] for e in m["entries"]}
    advice = m.get("advice") or {}
    r = compare_runs(before, after, mapping, advice.get("predicted_saving"))
    r["wall"] = compare_wall(wall_times(before, steps_before), wall_times(after, steps_after))
    r["job"] = compare_job(steps_before, steps_after, advice.get("predicted_job_saving"),
                           (advice.get("job_model") or {}).get("mode"))
    n = r["staged_files"]
    if r["copies_read"] == 0:
        raise TfdarshanError(
            f"AFTER ({args.compare[1]}) read none of the {n} staged copies"
            + (f" but {r['sources_read']} of their sources" if r["sources_read"] else "")
            + ": nothing to compare. Did it run under `tfdarshan run --staged`, or its input pipeline use "
              "tfdarshan.staged_paths()?")
    print(json.dumps(r, indent=1) if args.format == "json" else compare_text(r))
    if r["sources_read"]:
        print(f"tfdarshan recommend: warning: AFTER read {r['sources_read']} of the {n} staged files from "
              f"their sources, not their copies; the saving above covers the copies only", file=sys.stderr)
        return 1
    return 0


def compare_text(r) -> str:
    """--compare in words: what the user waits for, then the I/O time."""
    from tfdarshan.advice.compare import served_label
    from tfdarshan.advice.file_table import human_time
    w = r["wall"]

    def change(k, what):
        b, a, c = w[k]["before"], w[k]["after"], w[k]["change"]
        if b is None or a is None:
            return f"{what}: unknown (no step markers in {'BEFORE' if b is None else 'AFTER'})"
        return f"{what} {human_time(b)} -> {human_time(a)} ({100 * c:+.0f} %)" if c is not None else \
            f"{what} {human_time(b)} -> {human_time(a)}"
    steps = w["steps"]
    lines = [job_text(r["job"]),
             change("step_time", "step time (median step; each step's slowest process)"),
             change("training_time", f"training time (all steps: {steps['before']} before, {steps['after']} after)"),
             change("window_time", "window (the whole profiled span)")]
    ratio = (f"{r['achieved_over_predicted']:.2f} of the prediction of {human_time(r['predicted_saving'])}"
             if r["predicted_saving"] is not None else "the manifest holds no prediction")
    lines.append(f"staged files' I/O time, summed over threads and ranks (it can exceed the wall time it overlaps): "
                 f"{human_time(r['before_time'])} before, {human_time(r['after_time'])} after "
                 f"({r['copies_read']} of {r['staged_files']} copies read); saved {human_time(r['achieved_saving'])}, "
                 f"{ratio}; input bandwidth {r['bandwidth_before'] / 2**20:.0f} -> {r['bandwidth_after'] / 2**20:.0f} MiB/s")
    if r["served"]["staged"] is not None:
        lines.append(served_label(r["served"]))
    return "\n".join(lines)


def job_text(j) -> str:
    """--compare's first line: the job time saved against the plan's prediction."""
    from tfdarshan.advice import job_time
    from tfdarshan.advice.file_table import human_time
    if j["before"] is None or j["after"] is None:
        return f"job time: unknown (no training steps in {'BEFORE' if j['before'] is None else 'AFTER'})"
    said = (f"predicted {human_time(j['predicted'])}; achieved/predicted {j['ratio']:.2f}" if j["ratio"] is not None
            else f"predicted {human_time(j['predicted'])}" if j["predicted"] is not None
            else "the manifest holds no job-time prediction (planned without step series)")
    return (f"job time {human_time(j['before'])} -> {human_time(j['after'])}: saved {human_time(j['achieved'])}, "
            f"{said} ({job_time.MODES[j['mode']]})")
