"""The read studies' procedure (ImageNet-like, malware-like), for each:

1. generate the data set on the local disk and serve it through the slow
   FUSE tier (case_studies/slowfs.c); probe the slow tier `probes` times
   (they must agree) and the fast tier (/dev/shm);
2. plan: one profiled epoch with one reader (the paper's parallelism
   finding) and one with many, whose profile gives the paper's findings and
   the advisor's recommendation under a budget of 10 % of the data set's
   bytes, with each plan's predicted job-time saving (advice/job_time.py:
   the training steps' wall time); stage that, and separately the paper's
   rule (files under 2 MB);
3. measure: `rounds` rounds, each running every configuration (unprofiled,
   profiled, staged as recommended, staged by the rule) once in a shuffled
   order, with the data set's page cache dropped before every run and the
   slow-tier daemon's CPU time read around it; gains are taken within a
   round, against that round's unstaged profiled run, and each round's
   achieved job-time saving (the profiled run's training steps less the
   staged run's) is held against the predicted one;
4. with route_rounds (the malware-like study), the recommendation applied
   as a user would, each run a whole `tfdarshan run` of the study's script:
   unchanged under `--staged MANIFEST`, or edited to call staged_paths(),
   against the unstaged run of the same round (routes.py).

A staged configuration runs the same training code on the same slow-tier
paths: its copies are served from inside the shim (`attach(staged=...)`,
as `tfdarshan run --staged` does), each source checked before the epoch, as
`staged_paths()` would be called before it (staging="served"); or, with
staging="paths", the pipeline is given the copies' own paths (the edited
script the earlier results measured)."""
from __future__ import annotations

import contextlib
import dataclasses
import gc
import json
import os
import random
import pathlib
import shutil
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

from case_studies import datasets
from case_studies import stats as S
from case_studies.slowfs import CpuMeter, mounted

STUDIES = ("imagenet", "malware")


@dataclasses.dataclass
class Config:
    study: str
    files: int
    size_scale: float = 1.0
    batch: int = 32
    readers: int = 8
    meta_latency: float = 0.004        # seconds per lookup/open on the slow tier
    read_latency: float = 0.0005       # seconds per read request (128 KiB at most)
    bandwidth: str = "300M"            # the slow tier's shared read bandwidth
    budget_share: float = 0.10         # fast-tier capacity: this share of the data set's bytes
    rounds: int = 5                    # repetitions of every configuration, interleaved
    probes: int = 3                    # slow-tier probes, which must agree within PROBE_AGREEMENT
    probe_repeats: int = 5             # measurements a probe takes the median of
    probe_share: float = 1.0           # each slow-tier probe's size, opens and reads: this share of SLOW_PROBE's
    staging: str = "served"            # how staged configurations read their copies: "served" or "paths"
    route_rounds: int = 0              # rounds of whole `tfdarshan run`s, unstaged/--staged/edited (routes.py)


SCALES = {
    # tiny checks the mechanics only (one round, two short probes of a quarter of the size): no figure of it
    # is a result
    "tiny": {"imagenet": Config("imagenet", 48, size_scale=0.5, batch=8, rounds=1, probes=2, probe_repeats=2,
                                probe_share=0.25),
             "malware": Config("malware", 24, size_scale=1 / 16, batch=4, rounds=1, probes=2, probe_repeats=2,
                               probe_share=0.25)},
    "small": {"imagenet": Config("imagenet", 1500), "malware": Config("malware", 160, batch=16, route_rounds=5)},
    "paper": {"imagenet": Config("imagenet", 128_000), "malware": Config("malware", 10_868, batch=16)},
}
PROBE_AGREEMENT = 0.10
# each probe's read latency is the median of 5 x 128 cold 4 KiB reads: with
# 32 a run on a loaded machine disagreed by 14 % (a quiet one: 1-2 % either way)
SLOW_PROBE = dict(size=16 << 20, opens=50, small_reads=128)


def slow_probe(share: float = 1.0) -> Dict[str, int]:
    """SLOW_PROBE's size (whole MiB), opens and reads, each `share` of it."""
    return {"size": max(1, round((SLOW_PROBE["size"] >> 20) * share)) << 20,
            "opens": max(1, round(SLOW_PROBE["opens"] * share)),
            "small_reads": max(1, round(SLOW_PROBE["small_reads"] * share))}


CONFIGS = ("unprofiled", "profiled", "recommended", "under 2 MB")


@dataclasses.dataclass
class Run:
    label: str
    wall: float                     # seconds for the epoch
    steps: int
    step_time: float                # median step time
    bytes_read: int
    io_time: float                  # read + metadata time over the data set's files
    snapshot: object = None
    parts: Optional[Dict] = None
    series: Optional[tuple] = None  # (steps, step files with paths) of a profiled run

    @property
    def bandwidth(self) -> float:
        """Input bandwidth: bytes over time in read and metadata calls (as
        Darshan's I/O performance estimate counts it)."""
        return self.bytes_read / self.io_time if self.io_time > 0 else 0.0


def study_module(name: str):
    import importlib
    return importlib.import_module(f"case_studies.{name}")


def generate(cfg: Config, root: pathlib.Path) -> List[str]:
    if cfg.study == "imagenet":
        return datasets.make_imagenet(root, cfg.files, scale=cfg.size_scale)
    return datasets.make_malware(root, cfg.files, scale=cfg.size_scale)


def train_end_callback():
    """A Keras callback that notes when training ends (`.at`): the epoch's
    end. `fit` returns later, after tearing down its tf.data iterator, which
    here took either ~0.01 s or 3-4.5 s at random (in plain TensorFlow, never
    in 12 epochs with tf.data's autotuning off), a stall no epoch pays."""
    import tensorflow as tf

    class TrainEnd(tf.keras.callbacks.Callback):
        at = None

        def on_train_end(self, logs=None):
            self.at = time.perf_counter()

    return TrainEnd()


def train_epoch(cfg: Config, paths: List[str], readers: int, *, profile: bool, label: str,
                data_files: Optional[List[str]] = None) -> Run:
    """One epoch; with profile, the window's snapshot and step series."""
    import tfdarshan
    from tfdarshan.keras import IOProfileCallback
    mod = study_module(cfg.study)
    labels = [mod.label_of(p) for p in paths]
    classes = 10 if cfg.study == "imagenet" else 9
    model = mod.model(classes)
    ds = mod.pipeline(paths, labels, cfg.batch, readers)
    model.predict(np.zeros((1,) + model.input_shape[1:], "float32"), verbose=0)   # build outside the timing
    end = train_end_callback()
    if not profile:
        tfdarshan.detach()
        t = time.perf_counter()
        # (a dataset is shuffled by its pipeline: shuffle=False keeps Keras from warning it ignores its own)
        model.fit(ds, epochs=1, verbose=0, shuffle=False, callbacks=[end])
        teardown = time.perf_counter() - end.at
        wall = end.at - t
        del model, ds
        gc.collect()
        wait_until_reads_stop()
        return Run(label, wall, 0, 0.0, 0, 0.0, parts={"teardown": teardown})
    tfdarshan.attach()
    t = time.perf_counter()
    with tfdarshan.profile(trace=False) as prof:
        model.fit(ds, epochs=1, verbose=0, shuffle=False, callbacks=[IOProfileCallback(), end])
        fit = end.at - t
        teardown = time.perf_counter() - end.at
    wall = time.perf_counter() - t - teardown
    # Keras keeps an iterator for a next epoch whose prefetch threads read on
    # in the background: release it, or its reads land in the next run
    del model, ds
    gc.collect()
    wait_until_reads_stop()
    snap = prof.snapshot
    files = set(data_files or paths)
    p = snap.posix[snap.posix["path"].isin(files)]
    steps = prof.steps[prof.steps["step"] >= 0]
    step_time = float(np.median(steps["end"] - steps["start"])) if len(steps) else 0.0
    dur = (steps["end"] - steps["start"]).to_numpy()
    # where the epoch's time went: the steps, the slowest one, and the
    # profiler's own closing (inside the epoch's wall time); and fit's
    # teardown after the epoch (outside it)
    parts = {"fit": fit, "close": wall - fit, "teardown": teardown, "steps": float(dur.sum()), "slowest_step": float(dur.max()),
             "slowest_step_index": int(np.argmax(dur)), "before_first_step": float(steps["start"].min()),
             "after_last_step": float(snap.end - snap.start - steps["end"].max())} if len(dur) else {}
    return Run(label, wall, len(steps), step_time, int(p["POSIX_BYTES_READ"].sum()),
               float((p["POSIX_F_READ_TIME"] + p["POSIX_F_META_TIME"]).sum()), snap, parts,
               (prof.steps, with_paths(prof.step_files, snap)))


def with_paths(step_files, snap):
    """The step series' per-file rows with their paths (as written beside a log)."""
    paths = dict(zip(snap.posix["record_id"], snap.posix["path"]))
    paths.update(zip(snap.stdio["record_id"], snap.stdio["path"]))
    return step_files.assign(path=[paths.get(r, "") for r in step_files["record_id"]])


def wait_until_reads_stop(quiet: float = 0.2, limit: float = 10.0) -> None:
    """Let a released pipeline's prefetch threads wind down before the next
    run starts: until the process's read count (/proc/self/io) holds still
    for `quiet` seconds (reading /proc/self/io itself counts a few hundred
    bytes). Their reads would otherwise compete with the next run for the
    slow tier's bandwidth."""
    from tfdarshan.capture.coverage import proc_io
    deadline = time.monotonic() + limit
    last = proc_io()
    while last and time.monotonic() < deadline:
        time.sleep(quiet)
        now = proc_io()
        if now is None or now["rchar"] - last["rchar"] < 4096:
            return
        last = now


def _files_per_value(column) -> Dict[str, int]:
    """{count: number of files with that count}, e.g. {"1": 1499, "0": 1}:
    a file still being read when the window closed shows as the exception."""
    counts = column.astype(int).value_counts()
    return {str(k): int(v) for k, v in counts.sort_values(ascending=False).items()}


def findings(run: Run, paths: List[str]) -> Dict:
    """The paper's observations, measured."""
    snap = run.snapshot
    p = snap.posix[snap.posix["path"].isin(set(paths))]
    ex = snap.extra[snap.extra["module"] == "POSIX"]
    zero = ex.set_index("record_id")["ZERO_READS"].reindex(p["record_id"]).fillna(0)
    reads = int(p["POSIX_READS"].sum())
    return {
        "files": len(paths), "files_read": len(p),
        "opens_per_file": _files_per_value(p["POSIX_OPENS"]),
        "zero_reads_per_file": _files_per_value(zero),
        "reads": reads, "reads_under_100": int(p["POSIX_SIZE_READ_0_100"].sum()),
        "share_under_100": float(p["POSIX_SIZE_READ_0_100"].sum()) / max(reads, 1),
        "sequential": float(p["POSIX_SEQ_READS"].sum()) / max(reads, 1),
        "mean_request": float(p["POSIX_BYTES_READ"].sum()) / max(reads - int(zero.sum()), 1),
    }


def stage_selection(paths: List[str], root: str) -> Dict[str, str]:
    """Stage `paths` under root with the stager, recording them in a staging
    map of root's own (root/staged.json: configurations staging the same
    file keep apart copies); the source -> copy mapping. The manifest stays
    at root/manifest.json, for serving."""
    from tfdarshan.advice import stager
    os.makedirs(root, exist_ok=True)
    mpath = os.path.join(root, "manifest.json")
    with staging_map(root):
        pathlib.Path(mpath).write_text(json.dumps(stager.make_manifest(paths, os.path.join(root, "copies"),
                                                                       progress=True)))
        r = stager.stage(mpath, progress=True)
    if not r.ok:
        raise RuntimeError(f"staging failed: {r.failed[:3]}")
    return {e["source"]: e["destination"] for e in json.loads(pathlib.Path(mpath).read_text())["entries"]}


@contextlib.contextmanager
def staging_map(root: str):
    """The staging map (and this host's record of its copies) under root."""
    before = os.environ.get("TFDARSHAN_STAGING_MAP")
    os.environ["TFDARSHAN_STAGING_MAP"] = os.path.join(root, "staged.json")
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TFDARSHAN_STAGING_MAP", None)
        else:
            os.environ["TFDARSHAN_STAGING_MAP"] = before


@contextlib.contextmanager
def served_from(root: Optional[str]):
    """The staged configuration under root served from inside the shim (its
    sources checked now, before the epoch); nothing when root is None."""
    import tfdarshan
    if root is None:
        yield
        return
    with staging_map(root):
        tfdarshan.serve_staged(os.path.join(root, "manifest.json"), check_ahead=True)
    try:
        yield
    finally:
        tfdarshan.serve_staged(None)


def probe_slow(directory: str, n: int, repeats: int, **sizes) -> Dict:
    """`tfdarshan probe` of the slow tier n times (each the median of
    `repeats` measurements): each probe's figures, their median and spread,
    and whether they agree within PROBE_AGREEMENT."""
    from tfdarshan.advice import tiers
    probes = []
    for _ in range(n):
        os.makedirs(directory, exist_ok=True)
        probes.append(tiers.probe(directory, repeats=repeats, **sizes).to_dict())
        shutil.rmtree(directory, ignore_errors=True)
    fields = ("open_latency", "stat_latency", "read_latency", "bandwidth")
    spread = {f: S.spread(S.summary([p[f] for p in probes])) for f in fields}
    return {"probes": probes, "median": {f: float(np.median([p[f] for p in probes])) for f in fields},
            "spread": spread, "agree": all(v <= PROBE_AGREEMENT for v in spread.values())}


def drop_cache(paths) -> None:
    """Evict the data set's pages (the slow tier's backing files) before a
    run, so no run starts warmer than another."""
    from tfdarshan.advice import tiers
    tiers.evict_cache(paths)


def measured(daemon_pid: int, run) -> tuple:
    """(result of run(), the slow-tier daemon's CPU seconds during it, the
    cores other processes used meanwhile)."""
    with CpuMeter(daemon_pid) as m:
        r = run()
    return r, m.daemon, m.others_cores


def run_study(cfg: Config, workdir: pathlib.Path, log=print) -> Dict:
    from tfdarshan.advice import advisor, tiers
    data = workdir / "data" / cfg.study
    log(f"== {cfg.study}-like: {cfg.files} files, {cfg.rounds} rounds")
    local = generate(cfg, data)
    total = sum(os.path.getsize(p) for p in local)
    mnt = f"/tmp/tfdarshan-slowfs-{cfg.study}-{os.getpid()}"
    fast_root = tempfile.mkdtemp(prefix=f"tfd-{cfg.study}-", dir="/dev/shm")
    result: Dict = {"config": dataclasses.asdict(cfg), "dataset_bytes": total}
    try:
        with mounted(str(data), mnt, meta_latency=cfg.meta_latency, read_latency=cfg.read_latency,
                     bandwidth=cfg.bandwidth) as tier:
            slow_paths = [os.path.join(mnt, os.path.relpath(p, data)) for p in local]
            slow = probe_slow(os.path.join(mnt, ".probe"), cfg.probes, cfg.probe_repeats,
                              **slow_probe(cfg.probe_share))
            fast = tiers.probe(fast_root, size=16 << 20)
            result["tiers"] = {"slow": slow, "fast": fast.to_dict()}
            m = slow["median"]
            log(f"   slow tier: {m['open_latency'] * 1e3:.1f} ms open, {m['read_latency'] * 1e3:.2f} ms/request, "
                f"{m['bandwidth'] / 2**20:.0f} MiB/s (probes agree within 10 %: {slow['agree']}); "
                f"fast tier: {fast.bandwidth / 2**20:.0f} MiB/s")

            # plan: the paper's findings and the recommendation, from one profiled epoch
            drop_cache(local)
            one = train_epoch(cfg, slow_paths, 1, profile=True, label="1 reader")
            drop_cache(local)
            plan = train_epoch(cfg, slow_paths, cfg.readers, profile=True, label="plan")
            result["findings"] = findings(plan, slow_paths)
            result["one_reader"] = {"wall": one.wall, "bandwidth": one.bandwidth}
            budget = int(total * cfg.budget_share)
            advice = advisor.recommend(plan.snapshot, fast, budget, steps=plan.series[0], step_files=plan.series[1])
            job = advice.job or {"savings": {}, "model": None}
            result["job_model"] = job["model"]
            result["findings_advisor"] = [f.title for f in advice.findings]
            sel = {"recommended": advice.chosen, "under 2 MB": advice.baselines["under_2mb"]}
            chosen = {k: [advice.costs["path"].iat[i] for i in v] for k, v in sel.items()}
            log(f"   staging {len(chosen['recommended'])} files as recommended, "
                f"{len(chosen['under 2 MB'])} under 2 MB for the paper's rule")
            roots = {k: os.path.join(fast_root, k.replace(" ", "_")) for k in chosen}
            mappings = {k: stage_selection(v, roots[k]) for k, v in chosen.items()}
            result["staging_by"] = cfg.staging
            local_of = dict(zip(slow_paths, local))
            result["staging"] = {
                k: {"files": len(v), "bytes": int(sum(os.path.getsize(local_of[x]) for x in v)),
                    "predicted_saving": advice.saving(sel[k]),
                    "predicted_job_saving": job["savings"].get("chosen" if k == "recommended" else "under_2mb"),
                    "predicted_gain": plan.io_time / max(plan.io_time - advice.saving(sel[k]), 1e-12) - 1}
                for k, v in chosen.items()}
            plan_snap = plan.snapshot
            del plan, one
            gc.collect()

            rounds = []
            order_rng = random.Random(f"{cfg.study}-{cfg.files}")
            for r in range(cfg.rounds):
                order = list(CONFIGS)
                order_rng.shuffle(order)
                row = {"order": order}
                for name in order:
                    drop_cache(local)
                    edited = name in mappings and cfg.staging == "paths"
                    paths = [mappings[name].get(p, p) for p in slow_paths] if edited else slow_paths
                    with served_from(roots[name] if name in mappings and not edited else None):
                        run, cpu, others = measured(tier.pid, lambda: train_epoch(
                            cfg, paths, cfg.readers, profile=name != "unprofiled", label=name, data_files=paths))
                    row[name] = {"wall": run.wall, "bandwidth": run.bandwidth, "step_time": run.step_time,
                                 "io_time": run.io_time, "bytes_read": run.bytes_read, "daemon_cpu": cpu,
                                 "others_cores": others,
                                 **(run.parts or {})}
                    if name in mappings and r == 0:
                        # the mechanics, which no noise can flip: the staged run read the copies
                        c = advisor.compare_runs(plan_snap, run.snapshot, mappings[name], None)
                        result["staging"][name].update(copies_read=c["copies_read"], sources_read=c["sources_read"],
                                                       served=c["served"])
                    del run
                    gc.collect()
                log(f"   round {r + 1}/{cfg.rounds}: " + ", ".join(
                    f"{n} {row[n]['wall']:.1f} s" for n in CONFIGS))
                rounds.append(row)
            result["rounds"] = rounds
            result["summary"] = summarize(rounds, {k: v.get("predicted_job_saving")
                                                   for k, v in result["staging"].items()})
            if cfg.route_rounds:
                # the recommendation applied as a user would: the script unchanged under --staged, or edited
                from case_studies.routes import run_routes
                result["routes"] = run_routes(cfg, cfg.route_rounds, mnt, roots["recommended"], tier.pid, workdir,
                                              lambda: drop_cache(local), log)
    finally:
        shutil.rmtree(fast_root, ignore_errors=True)
    return result


def summarize(rounds: List[Dict], predicted_job: Optional[Dict] = None) -> Dict:
    """Medians and intervals over the rounds: per configuration, and the
    within-round gains against the unstaged profiled run; with each staged
    configuration's predicted job-time saving, the saving each round
    achieved in its training steps and its ratio to the prediction."""
    out: Dict = {"configs": {}, "gains": {}}
    for name in CONFIGS:
        runs = [r[name] for r in rounds]
        out["configs"][name] = {k: S.summary([x[k] for x in runs]) for k in ("wall", "bandwidth", "step_time")}
        out["configs"][name]["daemon_cpu_share"] = S.summary([x["daemon_cpu"] / x["wall"] for x in runs])
        out["configs"][name]["others_cores"] = S.summary([x.get("others_cores") for x in runs])
    base = [r["profiled"] for r in rounds]
    for name in ("recommended", "under 2 MB"):
        st = [r[name] for r in rounds]
        out["gains"][name] = {
            "bandwidth": S.summary([s["bandwidth"] / b["bandwidth"] - 1 for s, b in zip(st, base)]),
            "epoch_time": S.summary([s["wall"] / b["wall"] - 1 for s, b in zip(st, base)]),
            "slower_rounds": [i + 1 for i, (s, b) in enumerate(zip(st, base)) if s["wall"] > b["wall"]]}
        pred = (predicted_job or {}).get(name)
        saved = [b["steps"] - s["steps"] for s, b in zip(st, base) if "steps" in s and "steps" in b]
        out["gains"][name]["job_saving"] = S.summary(saved)
        out["gains"][name]["job_ratio"] = S.summary([x / pred for x in saved] if pred else [])
    out["recommended_minus_rule"] = {
        "bandwidth": S.summary([r["recommended"]["bandwidth"] / r["profiled"]["bandwidth"]
                                - r["under 2 MB"]["bandwidth"] / r["profiled"]["bandwidth"] for r in rounds]),
        "epoch_time": S.summary([(r["recommended"]["wall"] - r["under 2 MB"]["wall"]) / r["profiled"]["wall"]
                                 for r in rounds])}
    out["overhead"] = S.summary([r["profiled"]["wall"] / r["unprofiled"]["wall"] - 1 for r in rounds])
    allruns = [r[n] for r in rounds for n in CONFIGS]
    out["daemon_cpu_share"] = S.summary([x["daemon_cpu"] / x["wall"] for x in allruns])
    return out
