"""The case-study procedure, for each study:

1. generate the data set on the local disk and serve it through the slow
   FUSE tier; probe both tiers (the FUSE mount and /dev/shm);
2. train one epoch with one reader and with many, profiled, and epochs with
   many readers profiled and unprofiled in interleaved pairs, for the
   overhead of profiling;
3. report the paper's findings from the profile;
4. recommend what to stage under a budget of 10 % of the data set's bytes,
   and stage that, and separately the paper's rule (files under 2 MB);
5. train again reading the staged copies; compare bandwidth, step time,
   predicted and achieved gains."""
from __future__ import annotations

import dataclasses
import gc
import json
import os
import pathlib
import shutil
import tempfile
import time
from typing import Dict, List, Optional

import numpy as np

from case_studies import datasets
from case_studies.slowfs import mounted

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
    overhead_pairs: int = 3            # profiled/unprofiled epoch pairs, interleaved, for the overhead


SCALES = {
    "tiny": {"imagenet": Config("imagenet", 48, size_scale=0.5, batch=8, overhead_pairs=1),
             "malware": Config("malware", 24, size_scale=1 / 16, batch=4, overhead_pairs=1)},
    "small": {"imagenet": Config("imagenet", 1500), "malware": Config("malware", 160, batch=16)},
    "paper": {"imagenet": Config("imagenet", 128_000), "malware": Config("malware", 10_868, batch=16)},
}


@dataclasses.dataclass
class Run:
    label: str
    wall: float                     # seconds for the epoch
    steps: int
    step_time: float                # median step time
    bytes_read: int
    io_time: float                  # read + metadata time over the data set's files
    snapshot: object = None

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
    if not profile:
        tfdarshan.detach()
        t = time.perf_counter()
        model.fit(ds, epochs=1, verbose=0)
        wall = time.perf_counter() - t
        del model, ds
        gc.collect()
        wait_until_reads_stop()
        return Run(label, wall, 0, 0.0, 0, 0.0)
    tfdarshan.attach()
    t = time.perf_counter()
    with tfdarshan.profile(trace=False) as prof:
        model.fit(ds, epochs=1, verbose=0, callbacks=[IOProfileCallback()])
    wall = time.perf_counter() - t
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
    return Run(label, wall, len(steps), step_time, int(p["POSIX_BYTES_READ"].sum()),
               float((p["POSIX_F_READ_TIME"] + p["POSIX_F_META_TIME"]).sum()), snap)


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


def overhead(cfg: Config, paths: List[str], profiled: Run, bare: Run):
    """Median and range of the profiled/unprofiled epoch-time ratio over
    interleaved pairs (the first pair is the one already run), alternating
    which goes first: one pair on a shared slow tier is mostly noise."""
    ratios = [profiled.wall / bare.wall]
    for i in range(1, cfg.overhead_pairs):
        order = (False, True) if i % 2 else (True, False)
        walls = {p: train_epoch(cfg, paths, cfg.readers, profile=p, label="overhead").wall for p in order}
        ratios.append(walls[True] / walls[False])
    return float(np.median(ratios)) - 1, [min(ratios) - 1, max(ratios) - 1]


def _files_per_value(column) -> Dict[str, int]:
    """{count: number of files with that count}, e.g. {"1": 1499, "0": 1}:
    a file still being read when the window closed shows as the exception."""
    counts = column.astype(int).value_counts()
    return {str(k): int(v) for k, v in counts.sort_values(ascending=False).items()}


def findings(run: Run, paths: List[str]) -> Dict:
    """The paper's observations, measured."""
    snap = run.snapshot
    p = snap.posix[snap.posix["path"].isin(set(paths))]
    zero = snap.extra.set_index("record_id")["ZERO_READS"].reindex(p["record_id"]).fillna(0)
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
    """Stage `paths` under root with the stager; the source -> copy mapping."""
    from tfdarshan.advice import stager
    fd, mpath = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        pathlib.Path(mpath).write_text(json.dumps(stager.make_manifest(paths, root, progress=True)))
        r = stager.stage(mpath, progress=True)
        if not r.ok:
            raise RuntimeError(f"staging failed: {r.failed[:3]}")
        return {e["source"]: e["destination"] for e in json.loads(pathlib.Path(mpath).read_text())["entries"]}
    finally:
        for p in (mpath, mpath + ".state.json"):
            if os.path.exists(p):
                os.unlink(p)


def run_study(cfg: Config, workdir: pathlib.Path, log=print) -> Dict:
    from tfdarshan.advice import advisor, tiers
    data = workdir / "data" / cfg.study
    log(f"== {cfg.study}-like: {cfg.files} files")
    local = generate(cfg, data)
    total = sum(os.path.getsize(p) for p in local)
    mnt = f"/tmp/tfdarshan-slowfs-{cfg.study}-{os.getpid()}"
    fast_root = tempfile.mkdtemp(prefix=f"tfd-{cfg.study}-", dir="/dev/shm")
    result: Dict = {"config": dataclasses.asdict(cfg), "dataset_bytes": total}
    try:
        with mounted(str(data), mnt, meta_latency=cfg.meta_latency, read_latency=cfg.read_latency,
                     bandwidth=cfg.bandwidth):
            slow_paths = [os.path.join(mnt, os.path.relpath(p, data)) for p in local]
            probe_dir = os.path.join(mnt, ".probe")
            os.makedirs(probe_dir, exist_ok=True)
            slow = tiers.probe(probe_dir, size=16 << 20, opens=50, small_reads=32)
            shutil.rmtree(probe_dir, ignore_errors=True)
            fast = tiers.probe(fast_root, size=16 << 20)
            result["tiers"] = {"slow": slow.to_dict(), "fast": fast.to_dict()}
            log(f"   slow tier: {slow.open_latency * 1e3:.1f} ms open, {slow.read_latency * 1e3:.2f} ms/request, "
                f"{slow.bandwidth / 2**20:.0f} MiB/s; fast tier: {fast.bandwidth / 2**20:.0f} MiB/s")

            one = train_epoch(cfg, slow_paths, 1, profile=True, label="1 reader")
            many = train_epoch(cfg, slow_paths, cfg.readers, profile=True, label=f"{cfg.readers} readers")
            bare = train_epoch(cfg, slow_paths, cfg.readers, profile=False, label="unprofiled")
            result["findings"] = findings(many, slow_paths)
            result["overhead"], result["overhead_range"] = overhead(cfg, slow_paths, many, bare)

            budget = int(total * cfg.budget_share)
            advice = advisor.recommend(many.snapshot, fast, budget)
            ours = [advice.costs["path"].iat[i] for i in advice.chosen]
            rule = [advice.costs["path"].iat[i] for i in advice.baselines["under_2mb"]]
            log(f"   staging {len(ours)} files ({advice.bytes(advice.chosen) / 2**20:.1f} MiB) as recommended, "
                f"and {len(rule)} files under 2 MB for the paper's rule")
            runs, mappings = {"before": many}, {}
            for name, chosen in (("recommended", ours), ("under 2 MB", rule)):
                mappings[name] = stage_selection(chosen, os.path.join(fast_root, name.replace(" ", "_")))
                staged = [mappings[name].get(p, p) for p in slow_paths]
                runs[name] = train_epoch(cfg, staged, cfg.readers, profile=True, label=name, data_files=staged)
            predicted = {"recommended": advice.saving(advice.chosen),
                         "under 2 MB": advice.saving(advice.baselines["under_2mb"])}
            local_of = dict(zip(slow_paths, local))
            result["staging"] = {
                name: {"files": len(sel), "bytes": int(sum(os.path.getsize(local_of[x]) for x in sel)),
                       "predicted_saving": predicted[name],
                       "predicted_gain": many.io_time / max(many.io_time - predicted[name], 1e-12) - 1,
                       "achieved_gain": runs[name].bandwidth / many.bandwidth - 1 if many.bandwidth else 0.0,
                       # the mechanics, which no noise can flip: the staged run read the copies
                       **{k: advisor.compare_runs(many.snapshot, runs[name].snapshot, mappings[name], None)[k]
                          for k in ("copies_read", "sources_read")}}
                for name, sel in (("recommended", ours), ("under 2 MB", rule))}
            result["runs"] = {r.label: {"wall": r.wall, "steps": r.steps, "step_time": r.step_time,
                                        "bytes_read": r.bytes_read, "io_time": r.io_time, "bandwidth": r.bandwidth}
                              for r in [one, many, bare] + [runs["recommended"], runs["under 2 MB"]]}
            result["findings_advisor"] = [f.title for f in advice.findings]
    finally:
        shutil.rmtree(fast_root, ignore_errors=True)
    return result
