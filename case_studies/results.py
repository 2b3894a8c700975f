"""RESULTS.md and its plots, from the runners' results. Every figure is a
median with its interval over the interleaved rounds; a comparison is
stated as a win only when its interval excludes zero."""
from __future__ import annotations

import pathlib
from typing import Dict, List

from case_studies import stats as S

MiB = 2**20
MIN_RUNS = 5             # fewer rounds than this make no claim


def _mib(b):
    return f"{b / MiB:.1f} MiB"


def _per_value(files_per_value) -> str:
    """'1 (1499 files), 0 (1 file)'."""
    return ", ".join(f"{v} ({n} file{'s' if n != 1 else ''})" for v, n in files_per_value.items())


def _pct(s, digits=1):
    return S.fmt(s, 100, "%", digits, sign=True)


def _errbar(ax, labels, sums, scale, color, ylabel):
    med = [s["median"] * scale for s in sums]
    err = [[(s["median"] - s["lo"]) * scale for s in sums], [(s["hi"] - s["median"]) * scale for s in sums]]
    ax.bar(labels, med, yerr=err, capsize=4, color=color)
    ax.set_ylabel(ylabel)
    ax.tick_params(axis="x", labelsize=8)


def plots(results: List[Dict], outdir: pathlib.Path) -> Dict[str, str]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    outdir.mkdir(parents=True, exist_ok=True)
    files = {}
    for r in results:
        study, sm = r["config"]["study"], r["summary"]
        fig, axes = plt.subplots(1, 3, figsize=(13, 3.4))
        if study == "checkpoint":
            names = list(sm["configs"])
            _errbar(axes[0], names, [sm["configs"][n]["wall"] for n in names], 1, "#1565c0", "epoch time (s)")
            _errbar(axes[1], names[1:], [sm["configs"][n]["checkpoint_share"] for n in names[1:]], 100, "#ef6c00",
                    "checkpoint I/O time (% of window)")
            for n, c in zip(names, ("#9e9e9e", "#c62828", "#1565c0")):
                series = r["rounds"][0][n]["step_series"]
                axes[2].plot([s[0] for s in series], [s[1] * 1e3 for s in series], label=n, color=c)
            axes[2].set_xlabel("step (round 1)")
            axes[2].set_ylabel("step time (ms)")
            axes[2].legend(fontsize=8)
            fig.suptitle("checkpointing: slow tier synchronously vs /dev/shm and a background drain "
                         "(median, min–max of the rounds)")
        else:
            names = list(sm["configs"])
            _errbar(axes[0], names[1:], [sm["configs"][n]["bandwidth"] for n in names[1:]], 1 / MiB,
                    ["#9e9e9e", "#1565c0", "#ef6c00"], "input bandwidth (MiB/s)")
            _errbar(axes[1], names, [sm["configs"][n]["wall"] for n in names], 1,
                    ["#bdbdbd", "#9e9e9e", "#1565c0", "#ef6c00"], "epoch time (s)")
            g = sm["gains"]
            x = [0, 1]
            for off, key, color, lab in ((-0.2, "bandwidth", "#1565c0", "bandwidth gain"),
                                         (0.2, "epoch_time", "#ef6c00", "epoch time change")):
                sums = [g[k][key] for k in ("recommended", "under 2 MB")]
                axes[2].bar([i + off for i in x], [100 * s["median"] for s in sums], width=0.4, color=color,
                            yerr=[[100 * (s["median"] - s["lo"]) for s in sums],
                                  [100 * (s["hi"] - s["median"]) for s in sums]], capsize=4, label=lab)
            axes[2].scatter([i - 0.2 for i in x], [100 * r["staging"][k]["predicted_gain"]
                                                   for k in ("recommended", "under 2 MB")],
                            marker="_", s=400, color="black", label="predicted bandwidth gain", zorder=3)
            axes[2].axhline(0, color="black", linewidth=0.5)
            axes[2].set_xticks(x, ["recommended", "under 2 MB"])
            axes[2].set_ylabel("% vs unstaged, same round")
            axes[2].legend(fontsize=7)
            fig.suptitle(f"{study}-like: slow tier, then staged to /dev/shm (median, min–max of the rounds)")
        fig.tight_layout()
        name = f"{study}.png"
        fig.savefig(outdir / name, dpi=100)
        plt.close(fig)
        files[study] = name
    return files


def _tier_rows(r) -> List[str]:
    slow, fast = r["tiers"]["slow"], r["tiers"]["fast"]
    m, sp = slow["median"], slow["spread"]
    return ["| tier | open | read request | read bandwidth |", "|---|---|---|---|",
            f"| slow (FUSE, C daemon), median of {len(slow['probes'])} probes | {m['open_latency'] * 1e3:.2f} ms "
            f"(spread {100 * sp['open_latency']:.1f} %) | {m['read_latency'] * 1e3:.3f} ms "
            f"(spread {100 * sp['read_latency']:.1f} %) | {m['bandwidth'] / MiB:.1f} MiB/s "
            f"(spread {100 * sp['bandwidth']:.1f} %) |",
            f"| fast (/dev/shm) | {fast['open_latency'] * 1e6:.1f} µs | {fast['read_latency'] * 1e6:.2f} µs | "
            f"{fast['bandwidth'] / MiB:.0f} MiB/s |", "",
            f"Repeated probes of the slow tier {'agree' if slow['agree'] else 'do NOT agree'} within 10 % "
            "(spread = (max − min) / median of the probes).", ""]


def _versus(s: Dict, what: str, a: str, b: str, higher_is_better: bool = True) -> str:
    """The claim the interval of the paired difference (a − b) allows."""
    if s["n"] < MIN_RUNS:
        return f"{a} against {b} on {what}: {_pct(s)} points from {s['n']} round(s), too few to compare."
    better, worse = (S.above_zero(s), S.below_zero(s)) if higher_is_better else (S.below_zero(s), S.above_zero(s))
    if better:
        return f"{a} beats {b} on {what} in every round ({_pct(s)} points)."
    if worse:
        return f"{b} beats {a} on {what} in every round ({_pct(s)} points)."
    return f"{a} and {b} differ by {_pct(s)} points on {what}: within noise."


def _others(cf) -> List[str]:
    """Other processes' CPU during the runs (older results did not measure it)."""
    if not any(v.get("others_cores", {}).get("n") for v in cf.values()):
        return []
    return ["", "CPU used by other processes on the machine during the runs, in cores (of 2): " +
            ", ".join(f"{k} {S.fmt(v['others_cores'], digits=2)}" for k, v in cf.items()) + "."]


def _read_study(r, images) -> List[str]:
    c, f, sm, st = r["config"], r["findings"], r["summary"], r["staging"]
    one = r["one_reader"]
    cf = sm["configs"]
    out = [f"## {c['study']}-like ({c['files']} files, {_mib(r['dataset_bytes'])})", "",
           f"![{c['study']}]({'results/' + images[c['study']]})", "",
           "Tiers, as `tfdarshan probe` measured them (the slow tier is configured with "
           f"{c['meta_latency'] * 1e3:g} ms per lookup/open, {c['read_latency'] * 1e3:g} ms per read request, "
           f"a {c['bandwidth']}B/s read pipe; an open pays one lookup per path component):", ""]
    out += _tier_rows(r)
    out += ["Findings (the paper's observations, from the planning run's profile):", "",
            f"- every file opened once per epoch: opens per file {_per_value(f['opens_per_file'])}",
            f"- a zero-length read after every file: zero-byte reads per file {_per_value(f['zero_reads_per_file'])}",
            f"- reads under 100 bytes: {f['reads_under_100']} of {f['reads']} ({100 * f['share_under_100']:.0f} %), "
            "all of them the end-of-file reads",
            f"- sequential reads: {100 * f['sequential']:.0f} %; mean request {f['mean_request'] / 1024:.0f} KiB",
            f"- more parallel reads: one reader (one run) {one['wall']:.1f} s per epoch at "
            f"{one['bandwidth'] / MiB:.1f} MiB/s; {c['readers']} readers (profiled, {cf['profiled']['wall']['n']} "
            f"runs) {S.fmt(cf['profiled']['wall'], unit='s')} at {S.fmt(cf['profiled']['bandwidth'], 1 / MiB, 'MiB/s')}",
            f"- the advisor's findings: {'; '.join(r['findings_advisor']) or 'none'}",
            f"- profiling overhead (epoch time profiled / unprofiled − 1, within a round): {_pct(sm['overhead'])}", "",
            f"Each configuration ran {cf['profiled']['wall']['n']} times, in shuffled order within each round, "
            f"the data set's page cache dropped before every run. Median [{cf['profiled']['wall']['method']}]:", "",
            "| configuration | epoch time | input bandwidth | median step | slow-tier daemon CPU (share of one core) |",
            "|---|---|---|---|---|"]
    for k, v in cf.items():
        prof = k != "unprofiled"
        out.append(f"| {k} | {S.fmt(v['wall'], unit='s', digits=2)} | "
                   f"{S.fmt(v['bandwidth'], 1 / MiB, 'MiB/s') if prof else '–'} | "
                   f"{S.fmt(v['step_time'], 1e3, 'ms') if prof else '–'} | {S.fmt(v['daemon_cpu_share'], 100, '%')} |")
    spreads = {k: S.spread(v["wall"]) for k, v in cf.items()}
    out += _others(cf)
    out += ["", "Spread between repeated runs ((max − min) / median of the epoch time): " +
            ", ".join(f"{k} {100 * v:.0f} %" for k, v in spreads.items()) + ".", "", _staged_how(r), "",
            "Staging, gains against the unstaged profiled run of the same round (bandwidth: higher is better; "
            "epoch time: negative is faster):", "",
            "| staged | files | bytes | predicted bandwidth gain | achieved bandwidth gain | epoch time change | "
            "rounds with a slower staged epoch |", "|---|---|---|---|---|---|---|"]
    for k, v in st.items():
        g = sm["gains"][k]
        slower = ", ".join(map(str, g["slower_rounds"])) or "none"
        out.append(f"| {k} | {v['files']} | {_mib(v['bytes'])} | {100 * v['predicted_gain']:+.1f} % | "
                   f"{_pct(g['bandwidth'])} | {_pct(g['epoch_time'])} | {slower} |")
    out += _job_time(r, st, sm)
    out.append("")
    for k in st:
        g, pred = sm["gains"][k], st[k]["predicted_gain"]
        if g["bandwidth"]["n"] < MIN_RUNS:
            continue
        where = "inside" if S.contains(g["bandwidth"], pred) else "outside"
        out.append(f"- {k}: the predicted bandwidth gain ({100 * pred:+.1f} %) lies {where} the achieved "
                   f"interval; epoch time {'shorter in every round' if S.below_zero(g['epoch_time']) else 'not shorter in every round' if g['slower_rounds'] else 'never longer, but its interval reaches zero'}.")
    for k in st:
        for i in sm["gains"][k]["slower_rounds"]:
            row = r["rounds"][i - 1]
            s_, b = row[k], row["profiled"]
            if "steps" in s_ and "steps" in b:
                # where the slower staged epoch lost its time: in its steps, or outside them
                out.append(f"  - round {i}, {k}: {s_['wall']:.2f} s against {b['wall']:.2f} s unstaged; steps "
                           f"{s_['steps']:.2f} s against {b['steps']:.2f} s, outside the steps "
                           f"{s_['fit'] - s_['steps']:.2f} s against {b['fit'] - b['steps']:.2f} s.")
    d = sm["recommended_minus_rule"]
    out += [f"- recommended against the rule: {_versus(d['bandwidth'], 'bandwidth gain', 'the recommendation', 'the rule')} "
            f"{_versus(d['epoch_time'], 'epoch time (share of the unstaged epoch)', 'the recommendation', 'the rule', higher_is_better=False)}",
            ""]
    return out + (_routes(r) if r.get("routes") else [])


def _routes(r) -> List[str]:
    """The recommendation applied through `tfdarshan run --staged` (the
    script unchanged) and through the edited script, against unstaged runs."""
    ro, st = r["routes"], r["staging"]["recommended"]
    sm, rounds = ro["summary"], ro["rounds"]
    n = len(rounds)
    out = ["### The plan applied with the script unchanged (`tfdarshan run --staged`)", "",
           f"The recommendation above ({st['files']} files, {_mib(st['bytes'])}), applied as a user would: every run "
           "a whole `tfdarshan run` of `case_studies/malware/train.py` (a new process) on the slow tier's paths, "
           f"the three routes in a shuffled order in each of {n} rounds, the data set's page cache dropped before "
           "each run:", ""]
    for k, what in (("unstaged", "unstaged"), ("served", "served, the script unchanged"),
                    ("edited", "edited, the file list through `tfdarshan.staged_paths()`")):
        out.append(f"- {what}: `{ro['commands'][k]}`")
    pred = st.get("predicted_job_saving")
    out += ["", "Job time is the training steps' wall time (job_time.py's rule); saved = the same round's unstaged "
                "run less the staged one, as `tfdarshan recommend --compare UNSTAGED STAGED --manifest MANIFEST` "
                "reports it" + (f" (the plan predicted {pred:.2f} s, from the in-process planning run above)"
                                if pred is not None else "")
            + f". Median [{sm['job_time']['unstaged']['method']}] of {n} rounds:", "",
            "| route | job time | saved against unstaged | share of the unstaged job time | served opens, bytes per run |",
            "|---|---|---|---|---|"]
    for k in ("unstaged", "served", "edited"):
        jt = S.fmt(sm["job_time"][k], unit="s", digits=2)
        if k == "unstaged":
            out.append(f"| {k} | {jt} | – | – | – |")
            continue
        g = sm[k]
        o, b = g["opens_served"], g["bytes_served"]
        served = "none" if not o["median"] else (
            f"{o['median']:.0f}, {_mib(b['median'])}" + ("" if o["lo"] == o["hi"] and b["lo"] == b["hi"]
                                                         else f" ({o['lo']:.0f}–{o['hi']:.0f} opens)"))
        out.append(f"| {k} | {jt} | {S.fmt(g['saved'], unit='s', digits=2)} | {_pct(g['saved_share'])} | {served} |")
    ratio, diff = sm["served_over_edited"], sm["served_minus_edited"]
    out += ["", f"- served over edited (the two savings' ratio within each round): {S.fmt(ratio, digits=2)}; "
                f"served − edited: {S.fmt(diff, unit='s', digits=2, sign=True)}."]
    if n < MIN_RUNS:
        out.append(f"- {n} round(s): too few to compare.")
    else:
        for k in ("served", "edited"):
            g = sm[k]["saved"]
            out.append(f"- {k}: " + ("saves job time in every round." if S.above_zero(g) else
                                     "does not save job time in every round (its interval reaches zero)."))
        out.append("- served against edited: " + (
            "the served route saves more than the edited script in every round." if S.above_zero(diff) else
            "the served route saves less than the edited script in every round." if S.below_zero(diff) else
            f"not shown: a route's saving reaches zero, so their ratio ({S.fmt(ratio, digits=2)}) says nothing "
            "about whether the served route achieves the edited script's gain." if not (
                S.above_zero(sm["served"]["saved"]) and S.above_zero(sm["edited"]["saved"])) else
            f"within noise: the served route achieved {S.fmt(ratio, digits=2)} of the edited script's saving, and "
            "the interval contains 1."))
    text = rounds[0]["served"].get("compare_text", "")
    line = next((x for x in text.splitlines() if x.startswith("served from")), None)
    if line:
        out.append(f"- `recommend --compare` on round 1's served run: \"{line.strip()}\"; staged files read from "
                   f"their sources in any round: {sm['served']['sources_read']} (served), "
                   f"{sm['edited']['sources_read']} (edited).")
    load, others = sm["load"], sm["others_cores"]
    out += [f"- load average (1 minute, read before and after every run): median {load['median']:.2f}, "
            f"{min(load['values']):.2f} to {max(load['values']):.2f}; other processes' CPU during the runs "
            f"(the run itself and the slow-tier daemon left out): median {others['median']:.2f} cores of 2, "
            f"at most {max(others['values']):.2f}.", ""]
    return out


def _job_time(r, st, sm) -> List[str]:
    """The advice's job-time prediction against what each round achieved."""
    m = r.get("job_model")
    if not m or not any("job_ratio" in sm["gains"][k] for k in st):
        return []
    out = ["", f"Job time (the training steps' wall time; the plan's prediction from the planning run, "
               f"{m['job_time']:.2f} s of steps there, its input wait {m['slowest_wait']:.2f} s measured as "
               f"{m['bound']}); achieved = the unstaged profiled run's steps less the staged run's, same round:", "",
           "| staged | predicted job-time saving | achieved | achieved / predicted |", "|---|---|---|---|"]
    for k in st:
        g, pred = sm["gains"][k], st[k].get("predicted_job_saving")
        if "job_ratio" not in g or pred is None:
            continue
        out.append(f"| {k} | {pred:.2f} s | {S.fmt(g['job_saving'], unit='s', digits=2)} | "
                   f"{S.fmt(g['job_ratio'], digits=2)} |")
    return out


def _staged_how(r) -> str:
    """How the staged configurations read their copies, and what round 1's served."""
    if r.get("staging_by") != "served":
        return ("The staged configurations' pipelines read the copies by their own paths (the training script "
                "edited to use them).")
    served = "; ".join(f"{k}: {v['served']['opens']} opens of {v['served']['files_throughout']} files, every "
                       f"open of every staged file" if v["served"]["files_throughout"] == v["files"] else
                       f"{k}: {v['served']['opens']} opens, {v['served']['files_throughout']} of {v['files']} files "
                       "served throughout" for k, v in r["staging"].items() if "served" in v)
    return ("The staged configurations run the training script unchanged, on the slow tier's paths: their copies "
            "are served from inside the shim (`attach(staged=manifest)`, what `tfdarshan run --staged` does), each "
            f"source checked before the epoch, as `staged_paths()` would be. Round 1 served {served}.")


def _checkpoint_study(r, images) -> List[str]:
    c, sm = r["config"], r["summary"]
    cf = sm["configs"]
    sync_runs = [x["slow, synchronous"] for x in r["rounds"]]
    pat = sync_runs[0]["pattern"]
    n = cf["none"]["wall"]["n"]
    out = [f"## Checkpointing ({c['steps']} steps, a checkpoint every {c['every']})", "",
           f"![checkpoint]({'results/' + images['checkpoint']})", "",
           f"A {c['width']}-wide three-layer MLP (SGD, about {sync_runs[0]['bytes'] / max(1, c['steps'] // c['every']) / 1e6:.0f} MB "
           "per checkpoint) trains on in-memory data; tf.train.CheckpointManager saves every "
           f"{c['every']} steps. The slow tier is configured with {c['write_latency'] * 1e3:g} ms per write "
           f"request, a {c['write_bandwidth']}B/s write pipe and {c['fsync_latency'] * 1e3:g} ms per fsync. "
           "*slow, synchronous*: save to the slow tier and fsync its files on the training thread (TensorFlow "
           "issues no fsync itself); *fast + drain*: save to /dev/shm, a background thread copies each "
           "checkpoint to the slow tier and fsyncs it, and the epoch ends when the last copy is durable.", ""]
    out += _tier_rows(r)
    out += [f"Each configuration ran {n} times, shuffled within each round. Median [{cf['none']['wall']['method']}]:", "",
            "| configuration | epoch time | checkpoint step | other steps | checkpoint I/O time (share of window) "
            "| checkpoint write bandwidth | slow-tier daemon CPU |", "|---|---|---|---|---|---|---|"]
    for k, v in cf.items():
        out.append(f"| {k} | {S.fmt(v['wall'], unit='s', digits=2)} | {S.fmt(v['checkpoint_step'], 1e3, 'ms', 0)} | "
                   f"{S.fmt(v['other_step'], 1e3, 'ms', 0)} | {S.fmt(v['checkpoint_share'], 100, '%')} | "
                   f"{S.fmt(v['write_bandwidth'], 1 / MiB, 'MiB/s')} | {S.fmt(v['daemon_cpu_share'], 100, '%')} |")
    spreads = {k: S.spread(v["wall"]) for k, v in cf.items()}
    out += _others(cf)
    out += ["", "Spread between repeated runs of the epoch time: " +
            ", ".join(f"{k} {100 * v:.0f} %" for k, v in spreads.items()) + ".", "",
            "Write pattern of a synchronous run, from the counters: " + "; ".join(
                f"{m}: {p['files']} files, {p['writes']} writes"
                + (f" of {p['bytes'] / p['writes'] / MiB:.1f} MiB on average" if p["writes"] else "")
                + f", {p['fsyncs']} fsyncs" for m, p in pat.items()) +
            ". TensorFlow writes checkpoints through STDIO (fopen/fwrite) and never fsyncs; the fsyncs are "
            "the study's own (POSIX).", ""]
    for k, s in sm["cost_over_none"].items():
        out.append(f"- {k}: epoch time {_pct(s)} over no checkpoints (same round).")
    d = sm["drain_vs_sync"]
    claim = ("too few rounds to compare" if d["n"] < MIN_RUNS else
             "shorter than the synchronous one in every round" if S.below_zero(d) else
             "longer than the synchronous one in every round" if S.above_zero(d) else "within noise of the synchronous one")
    out += [f"- fast + drain against slow, synchronous: epoch time {_pct(d)}, {claim}.",
            "- the advisor's checkpoint findings (in every run / in some runs):"]
    for k, v in cf.items():
        ck = [t for t in v["findings"] if "heckpoint" in t or "fsync" in t]
        every = [t for t in v["findings_every_run"] if t in ck]
        out.append(f"  - {k}: {'; '.join(every) or 'none'}"
                   + (f" (some runs only: {'; '.join(t for t in ck if t not in every)})" if set(ck) - set(every) else ""))
    out.append("")
    return out


def markdown(results: List[Dict], command: str, images: Dict[str, str], elapsed: float) -> str:
    out = ["# Case studies: results", "",
           "Produced by the runner on this kind of machine (2 cores, Debian 12, TensorFlow 2.21 CPU) "
           f"in {elapsed / 60:.1f} minutes with:", "", f"    {command}", "",
           "The slow tier is a FUSE file system (case_studies/slowfs.c, a C daemon on libfuse3) over the local "
           "disk that sleeps a fixed latency in every lookup, open, read and write request and fsync, and caps "
           "the shared read and write bandwidth (direct I/O, so no page cache); its own CPU time is measured "
           "during every run. The fast tier is `/dev/shm`. Input bandwidth is bytes read over the time spent "
           "in read and metadata calls on the data set's files (Darshan's I/O performance estimate). Every "
           "compared configuration runs in each of several rounds, in a shuffled order, with the data set's "
           "page cache dropped before each run; figures are medians with their interval (min–max below 10 "
           "runs, else a 95 % bootstrap of the median), gains are taken within a round. A difference is "
           "called a win only when its interval excludes zero; otherwise it is reported as within noise.", ""]
    for r in results:
        out += _checkpoint_study(r, images) if r["config"]["study"] == "checkpoint" else _read_study(r, images)
    return "\n".join(out) + "\n"
