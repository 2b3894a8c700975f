"""The checkpointing study's procedure.

A wide MLP (case_studies/checkpoint) trains on in-memory data for `steps`
steps, saving with tf.train.CheckpointManager every `every` steps, in three
configurations run `rounds` times each, interleaved in a shuffled order:

- none: no checkpoints (the floor);
- slow, synchronous: save to the slow tier, then fsync the checkpoint's
  files there (TensorFlow itself issues no fsync; a checkpoint that is not
  durable is not one), all on the training thread;
- fast + drain: save to /dev/shm, and a background thread copies each new
  checkpoint to the slow tier and fsyncs it; the epoch ends when the last
  copy is durable, so both checkpointing configurations promise the same.

Every run is profiled: the step series shows the spikes at checkpoint steps,
the counters the write pattern, and the advisor's checkpoint findings are
taken from each run."""
from __future__ import annotations

import dataclasses
import gc
import os
import pathlib
import random
import shutil
import tempfile
import time
from typing import Dict, List

import numpy as np

from case_studies import stats as S
from case_studies.runner import probe_slow, slow_probe
from case_studies.slowfs import CpuMeter, mounted

CONFIGS = ("none", "slow, synchronous", "fast + drain")


@dataclasses.dataclass
class CheckpointConfig:
    study: str = "checkpoint"
    steps: int = 90
    every: int = 30                    # long enough for the drain to copy one checkpoint before the next
    batch: int = 64
    width: int = 4096
    meta_latency: float = 0.004
    read_latency: float = 0.0005
    bandwidth: str = "100M"
    write_latency: float = 0.0005      # seconds per write request (128 KiB at most)
    write_bandwidth: str = "100M"      # the slow tier's shared write bandwidth
    fsync_latency: float = 0.05        # seconds per fsync (a commit on a shared file system)
    rounds: int = 5
    probes: int = 3                    # slow-tier probes (see runner.probe_slow)
    probe_repeats: int = 5
    probe_share: float = 1.0           # each slow-tier probe's size, opens and reads (runner.slow_probe)


SCALES = {"tiny": CheckpointConfig(steps=6, every=3, width=1024, rounds=1, probes=2, probe_repeats=2,
                                   probe_share=0.25),
          "small": CheckpointConfig(), "paper": CheckpointConfig(steps=300, every=30)}


def make_durable(files: List[str]) -> None:
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def train(cfg: CheckpointConfig, mode: str, slow_dir: str, fast_dir: str) -> Dict:
    """One profiled run in `mode`; wall time, step series figures, counters
    and the advisor's findings."""
    import tensorflow as tf
    import tfdarshan
    from case_studies import checkpoint as C
    from tfdarshan.advice import advisor, checkpoint_findings as CF, tiers
    model = C.model(cfg.width)
    opt = tf.keras.optimizers.SGD(0.01)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x, y):
        with tf.GradientTape() as t:
            loss = loss_fn(y, model(x, training=True))
        opt.apply_gradients(zip(t.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    ds = C.data(cfg.steps, cfg.batch)
    for x, y in ds.take(1):
        step(x, y)                     # trace and build outside the timing
    where = fast_dir if mode == "fast + drain" else slow_dir
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model, optimizer=opt), where, max_to_keep=2)
    drain = C.Drain(slow_dir) if mode == "fast + drain" else None
    tfdarshan.attach()
    # held past the timing: deleting a tf.data iterator sometimes stalls for
    # seconds (see runner.train_end_callback), after the epoch's last step
    batches = iter(ds)
    t = time.perf_counter()
    with tfdarshan.profile(trace=False) as prof:
        for i, (x, y) in enumerate(batches):
            with tfdarshan.step(i):
                step(x, y)
                if mode != "none" and (i + 1) % cfg.every == 0:
                    files = C.checkpoint_files(manager.save())
                    if drain:
                        drain.submit(files)
                    else:
                        make_durable(files)
        if drain:
            drain.close()
    wall = time.perf_counter() - t
    del batches
    snap, steps = prof.snapshot, prof.steps
    fast = tiers.Tier(path="/dev/shm", fstype="tmpfs", open_latency=2e-6, stat_latency=1e-6, read_latency=1e-6,
                      bandwidth=4e9, capacity=1 << 30, source="declared")
    io = CF.checkpoint_io(snap, fast)
    s = steps[steps["step"] >= 0]
    dur = (s["end"] - s["start"]).to_numpy()
    saved = ((s["step"].to_numpy() + 1) % cfg.every == 0) if mode != "none" else np.zeros(len(s), bool)
    spikes = {"checkpoint_steps": int(saved.sum()),      # the steps that saved: their spikes
              "checkpoint_step_median": float(np.median(dur[saved])) if saved.any() else None,
              "other_step_median": float(np.median(dur[~saved])) if (~saved).any() else None}
    out = {"wall": wall, "window": snap.end - snap.start, **spikes,
           "bytes": int(io["bytes"].sum()), "seconds": float(io["write_time"].sum() + io["meta_time"].sum()),
           "fsyncs": int(io["fsyncs"].sum()), "blocking_share": CF.blocking_share(steps),
           "pattern": {m: {"files": int(g["path"].nunique()), "writes": int(g["writes"].sum()),
                           "bytes": int(g["bytes"].sum()), "fsyncs": int(g["fsyncs"].sum()),
                           "write_time": float(g["write_time"].sum())}
                       for m, g in io.groupby("module")},
           "step_series": [[int(s), float(e - b), int(w)] for s, b, e, w in
                           steps[steps["step"] >= 0][["step", "start", "end", "bytes_written"]].itertuples(index=False)],
           "findings": [f.title for f in advisor.recommend(snap, fast, 1 << 30, steps=steps).findings]}
    out["write_bandwidth"] = out["bytes"] / max(sum(p["write_time"] for p in out["pattern"].values()), 1e-12)
    del model, opt, manager, prof, snap, ds
    gc.collect()
    return out


def run_study(cfg: CheckpointConfig, workdir: pathlib.Path, log=print) -> Dict:
    from tfdarshan.advice import tiers
    backing = workdir / "data" / "checkpoint"
    shutil.rmtree(backing, ignore_errors=True)
    backing.mkdir(parents=True)
    mnt = f"/tmp/tfdarshan-slowfs-checkpoint-{os.getpid()}"
    log(f"== checkpointing: {cfg.steps} steps, a checkpoint every {cfg.every}, {cfg.rounds} rounds")
    result: Dict = {"config": dataclasses.asdict(cfg)}
    with mounted(str(backing), mnt, meta_latency=cfg.meta_latency, read_latency=cfg.read_latency,
                 bandwidth=cfg.bandwidth, write_latency=cfg.write_latency, write_bandwidth=cfg.write_bandwidth,
                 fsync_latency=cfg.fsync_latency) as tier:
        result["tiers"] = {"slow": probe_slow(os.path.join(mnt, ".probe"), cfg.probes, cfg.probe_repeats,
                                              **slow_probe(cfg.probe_share))}
        fast_root = tempfile.mkdtemp(prefix="tfd-ckpt-", dir="/dev/shm")
        result["tiers"]["fast"] = tiers.probe(fast_root, size=16 << 20).to_dict()
        rounds = []
        order_rng = random.Random("checkpoint")
        try:
            for r in range(cfg.rounds):
                order = list(CONFIGS)
                order_rng.shuffle(order)
                row = {"order": order}
                for k, mode in enumerate(order):
                    slow_dir, fast_dir = os.path.join(mnt, f"r{r}-{k}"), os.path.join(fast_root, f"r{r}-{k}")
                    os.makedirs(slow_dir)
                    os.makedirs(fast_dir)
                    with CpuMeter(tier.pid) as meter:
                        row[mode] = train(cfg, mode, slow_dir, fast_dir)
                    row[mode].update(daemon_cpu=meter.daemon, others_cores=meter.others_cores)
                    shutil.rmtree(slow_dir, ignore_errors=True)
                    shutil.rmtree(fast_dir, ignore_errors=True)
                log(f"   round {r + 1}/{cfg.rounds}: " + ", ".join(f"{m} {row[m]['wall']:.1f} s" for m in CONFIGS))
                rounds.append(row)
        finally:
            shutil.rmtree(fast_root, ignore_errors=True)
    result["rounds"] = rounds
    result["summary"] = summarize(rounds)
    return result


def summarize(rounds: List[Dict]) -> Dict:
    out: Dict = {"configs": {}}
    for m in CONFIGS:
        runs = [r[m] for r in rounds]
        out["configs"][m] = {
            "wall": S.summary([x["wall"] for x in runs]),
            "checkpoint_seconds": S.summary([x["seconds"] for x in runs]),
            "checkpoint_share": S.summary([x["seconds"] / x["window"] for x in runs]),
            "write_bandwidth": S.summary([x["write_bandwidth"] for x in runs if x["bytes"]]),
            "checkpoint_step": S.summary([x["checkpoint_step_median"] for x in runs]),
            "other_step": S.summary([x["other_step_median"] for x in runs]),
            "daemon_cpu_share": S.summary([x["daemon_cpu"] / x["wall"] for x in runs]),
            "others_cores": S.summary([x.get("others_cores") for x in runs]),
            "findings": sorted({t for x in runs for t in x["findings"]}),
            "findings_every_run": sorted(set.intersection(*[set(x["findings"]) for x in runs])),
        }
    base = [r["none"]["wall"] for r in rounds]
    out["cost_over_none"] = {m: S.summary([r[m]["wall"] / b - 1 for r, b in zip(rounds, base)])
                             for m in CONFIGS[1:]}
    out["drain_vs_sync"] = S.summary([r["fast + drain"]["wall"] / r["slow, synchronous"]["wall"] - 1
                                      for r in rounds])
    out["daemon_cpu_share"] = S.summary([r[m]["daemon_cpu"] / r[m]["wall"] for r in rounds for m in CONFIGS])
    return out
