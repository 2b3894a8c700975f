"""Two routes to the staged copies, each a whole `tfdarshan run` of the
study's training script (case_studies/malware/train.py), as a user types it:

- unstaged: `tfdarshan run --logdir L train.py DATA` on the slow tier;
- served: the same command with `--staged MANIFEST`, the script unchanged;
- edited: the script with --staged-paths, its file list through
  tfdarshan.staged_paths() (the copies by their own paths).

`rounds` rounds run the three in a shuffled order, the data set's page
cache dropped before each; each staged run is compared with its round's
unstaged run by `tfdarshan recommend --compare UNSTAGED STAGED --manifest
MANIFEST --format json` (the job time saved, by job_time.py's one rule, and
what was served), and round 1's by the text a user reads too. The 1-minute
load average is read before and after every run, and the CPU other
processes used meanwhile (the run's own process and the slow-tier daemon
left out): the machine is shared."""
from __future__ import annotations

import json
import os
import pathlib
import random
import resource
import shutil
import subprocess
import sys
import time
from typing import Dict, List

from case_studies import stats as S
from case_studies.slowfs import cpu_seconds, machine_busy_seconds

ROUTES = ("unstaged", "served", "edited")
STAGED = ("served", "edited")
REPO = pathlib.Path(__file__).resolve().parent.parent
TRAIN = pathlib.Path(__file__).resolve().parent / "malware" / "train.py"
TFDARSHAN = [sys.executable, "-m", "tfdarshan"]


def command(route: str, logdir: str, manifest: str, data_root: str, batch: int, readers: int) -> List[str]:
    """The `tfdarshan run` command of a route."""
    return (["run", "--logdir", logdir] + (["--staged", manifest] if route == "served" else [])
            + [str(TRAIN), data_root, "--batch", str(batch), "--readers", str(readers)]
            + (["--staged-paths"] if route == "edited" else []))


def environment(staging_map: str) -> Dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", TFDARSHAN_STAGING_MAP=staging_map,
               PYTHONPATH=os.pathsep.join([str(REPO)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("TFDARSHAN_STAGED", None)          # only the served route serves
    return env


def load1() -> float:
    return float(pathlib.Path("/proc/loadavg").read_text().split()[0])


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed_run(args: List[str], env: Dict[str, str], daemon_pid: int) -> Dict:
    """One `tfdarshan ...` process: its wall time, the load around it and
    the cores other processes used meanwhile."""
    before = {"load": load1(), "t": time.perf_counter(), "busy": machine_busy_seconds(),
              "daemon": cpu_seconds(daemon_pid), "mine": cpu_seconds(os.getpid()), "child": children_cpu()}
    p = subprocess.run(TFDARSHAN + args, env=env, capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - before["t"]
    if p.returncode != 0:
        raise RuntimeError(f"tfdarshan {' '.join(args)} exited {p.returncode}: {p.stderr[-2000:]}")
    daemon = cpu_seconds(daemon_pid) - before["daemon"]
    child = children_cpu() - before["child"]
    mine = cpu_seconds(os.getpid()) - before["mine"]
    others = max(machine_busy_seconds() - before["busy"] - daemon - child - mine, 0.0) / wall
    return {"process_wall": wall, "load_before": before["load"], "load_after": load1(), "others_cores": others,
            "daemon_cpu": daemon, "run_cpu": child, "stderr": p.stderr[-500:]}


def compare(before: str, after: str, manifest: str, env: Dict[str, str], fmt: str = "json"):
    """`tfdarshan recommend --compare BEFORE AFTER --manifest M` (exit 1:
    some staged files read from their sources, which the JSON says)."""
    p = subprocess.run(TFDARSHAN + ["recommend", "--compare", before, after, "--manifest", manifest,
                                    "--format", fmt], env=env, capture_output=True, text=True, timeout=300)
    if p.returncode not in (0, 1):
        raise RuntimeError(f"recommend --compare {before} {after} exited {p.returncode}: {p.stderr[-2000:]}")
    return json.loads(p.stdout) if fmt == "json" else p.stdout


def run_routes(cfg, rounds: int, data_root: str, root: str, daemon_pid: int, workdir: pathlib.Path,
               drop_cache, log=print) -> Dict:
    """The three routes over `rounds` interleaved rounds, for the staged
    configuration under root (its manifest.json and staged.json)."""
    manifest = os.path.join(root, "manifest.json")
    env = environment(os.path.join(root, "staged.json"))
    logs = workdir / "routes" / cfg.study
    shutil.rmtree(logs, ignore_errors=True)
    rng = random.Random(f"routes-{cfg.study}-{cfg.files}")
    out: Dict = {"rounds": [], "commands": {r: "tfdarshan " + " ".join(
        command(r, "LOGS", "MANIFEST", "DATA", cfg.batch, cfg.readers)).replace(str(REPO) + "/", "")
        for r in ROUTES}}
    for i in range(rounds):
        order = list(ROUTES)
        rng.shuffle(order)
        row: Dict = {"order": order}
        for route in order:
            drop_cache()
            logdir = str(logs / f"{i + 1}-{route}")
            row[route] = timed_run(command(route, logdir, manifest, data_root, cfg.batch, cfg.readers), env,
                                   daemon_pid)
        base = str(logs / f"{i + 1}-unstaged")
        for route in STAGED:
            c = compare(base, str(logs / f"{i + 1}-{route}"), manifest, env)
            row[route].update(job=c["job"], training=c["wall"]["training_time"], served=c["served"],
                              copies_read=c["copies_read"], sources_read=c["sources_read"],
                              staged_files=c["staged_files"])
            if i == 0:
                row[route]["compare_text"] = compare(base, str(logs / f"{i + 1}-{route}"), manifest, env, "text")
        row["unstaged"]["job"] = {"job_time": row["served"]["job"]["before"]}
        log(f"   routes round {i + 1}/{rounds}: " + ", ".join(
            f"{r} saved {row[r]['job']['achieved']:.2f} s" for r in STAGED)
            + f" (unstaged {row['unstaged']['job']['job_time']:.2f} s; load {row['unstaged']['load_before']:.1f})")
        out["rounds"].append(row)
        shutil.rmtree(logs / f"{i + 1}-unstaged", ignore_errors=True)
        for route in STAGED:
            shutil.rmtree(logs / f"{i + 1}-{route}", ignore_errors=True)
    out["summary"] = summarize(out["rounds"])
    return out


def summarize(rounds: List[Dict]) -> Dict:
    """Per staged route, the job time saved against the same round's
    unstaged run (seconds, and as a share of it); the served route's saving
    over the edited one's, and their difference, within each round; the
    load average around every run and the other processes' cores."""
    out: Dict = {"job_time": {r: S.summary([x[r]["job"]["job_time"] if r == "unstaged" else x[r]["job"]["after"]
                                            for x in rounds]) for r in ROUTES}}
    for r in STAGED:
        out[r] = {"saved": S.summary([x[r]["job"]["achieved"] for x in rounds]),
                  "saved_share": S.summary([x[r]["job"]["achieved"] / x[r]["job"]["before"] for x in rounds]),
                  "opens_served": S.summary([x[r]["served"]["opens"] for x in rounds]),
                  "bytes_served": S.summary([x[r]["served"]["bytes"] for x in rounds]),
                  "sources_read": max(x[r]["sources_read"] for x in rounds)}
    out["served_over_edited"] = S.summary([x["served"]["job"]["achieved"] / x["edited"]["job"]["achieved"]
                                           for x in rounds if x["edited"]["job"]["achieved"]])
    out["served_minus_edited"] = S.summary([x["served"]["job"]["achieved"] - x["edited"]["job"]["achieved"]
                                            for x in rounds])
    out["load"] = S.summary([x[r][k] for x in rounds for r in ROUTES for k in ("load_before", "load_after")])
    out["others_cores"] = S.summary([x[r]["others_cores"] for x in rounds for r in ROUTES])
    return out
