"""`tfdarshan demo`: profile a small real training run end to end.

Generates a small image data set, trains a small Keras model from a tf.data
pipeline that reads it with tf.io.read_file, profiles the input I/O and
prints the per-file table."""
from __future__ import annotations

import argparse
import os
import pathlib
import sys
import time

from tfdarshan.cli import path_arg
from tfdarshan.errors import TfdarshanError


def add_parser(sub) -> None:
    p = sub.add_parser("demo", help="profile a small real TensorFlow training run",
                       description=__doc__)
    p.add_argument("--logdir", default="demo_logs", type=path_arg,
                   help="where the data set and logs go (default: demo_logs)")
    p.add_argument("--files", type=int, default=256, help="images in the data set (default: 256)")
    p.add_argument("--steps", type=int, default=12, help="training steps (default: 12)")
    p.add_argument("--batch", type=int, default=16, help="batch size (default: 16)")
    p.set_defaults(handler=run)


def make_dataset(root: pathlib.Path, n: int, seed: int = 0) -> list:
    """JPEGs in class folders, sizes spread like small photos."""
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        d = root / f"class_{i % 4}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"img_{i:05d}.jpg"
        paths.append(str(p))
        if p.exists():
            continue
        side = int(rng.integers(64, 256))
        img = rng.integers(0, 255, size=(side, side, 3), dtype=np.uint8)
        tf.io.write_file(str(p), tf.io.encode_jpeg(img, quality=int(rng.integers(70, 95))))
    return paths


def build_pipeline(paths, batch: int):
    import tensorflow as tf

    def load(path):
        label = tf.strings.to_number(tf.strings.substr(tf.strings.split(path, "/")[-2], 6, 1), tf.int32)
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(img, (64, 64)) / 255.0, label

    ds = tf.data.Dataset.from_tensor_slices(paths).shuffle(len(paths), seed=1)
    return ds.map(load, num_parallel_calls=4).batch(batch).repeat().prefetch(2)


def build_model():
    import tensorflow as tf
    return tf.keras.Sequential([
        tf.keras.Input((64, 64, 3)),
        tf.keras.layers.Conv2D(8, 3, strides=2, activation="relu"),
        tf.keras.layers.Conv2D(16, 3, strides=2, activation="relu"),
        tf.keras.layers.GlobalAveragePooling2D(),
        tf.keras.layers.Dense(4),
    ])


def run(args: argparse.Namespace) -> int:
    if args.files < 1 or args.steps < 3 or args.batch < 1:
        raise ValueError("--files and --batch must be positive and --steps at least 3")
    if os.path.exists(args.logdir) and not os.path.isdir(args.logdir):
        # refused before TensorFlow loads, not after
        raise TfdarshanError(f"--logdir {args.logdir}: exists and is not a directory")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    import tfdarshan  # noqa: F401  (importing it hooks the TensorFlow profiler)
    from tfdarshan.advice import file_table as report
    from tfdarshan.measures.human import count, human_bytes
    from tfdarshan.measures.time_in_calls import input_io_time
    from tfdarshan.logs.logdir import find_sessions, load_snapshot, load_steps
    from tfdarshan.steps.series import NOT_STEPS

    root = pathlib.Path(args.logdir).resolve()
    data, tb = root / "data", root / "tensorboard"
    print(f"tfdarshan demo: {args.files} images in {data}")
    paths = make_dataset(data, args.files)
    model = build_model()
    model.compile(optimizer="adam", loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    first, last = 2, args.steps - 1
    print(f"training {count(args.steps, 'step')}; the Keras TensorBoard callback profiles steps {first}-{last}")
    t0 = time.perf_counter()
    # (the pipeline shuffles: Keras' own shuffle would only warn that it is ignored for a dataset)
    model.fit(build_pipeline(paths, args.batch), steps_per_epoch=args.steps, epochs=1, verbose=0, shuffle=False,
              callbacks=[tf.keras.callbacks.TensorBoard(str(tb), profile_batch=(first, last))])
    print(f"trained in {time.perf_counter() - t0:.2f} s\n")
    session = find_sessions(tb)[-1]
    snap = load_snapshot(session)
    steps, step_files = load_steps(session)
    print(f"profiling session {session.directory}:")
    for name in sorted(p.name for p in session.directory.iterdir()):
        print(f"  {name}")
    print("\nper-step input I/O:")
    for r in steps.itertuples():
        io = input_io_time(r._asdict())
        name = f"step {r.step}" if r.step >= 0 else NOT_STEPS.get(r.step, f"entry {r.step}")
        print(f"  {name}: {human_bytes(r.bytes_read)} in {count(r.reads, 'read')} from {count(r.files, 'file')}, "
              f"{io * 1e3:.1f} ms in reads and metadata calls, took {(r.end - r.start) * 1e3:.1f} ms")
    print("\nper-file table of the profiled steps (busiest first):")
    print(report.render_text(report.file_table(snap), limit=10))
    import json
    cov = json.loads((session.directory / f"{session.hosts[0]}.coverage.json").read_text()) \
        if (session.directory / f"{session.hosts[0]}.coverage.json").exists() else None
    if cov and cov.get("share") is not None:
        excluded = cov.get("excluded_bytes")
        print(f"coverage: these counters hold {100 * cov['share']:.0f} % of the data I/O the kernel counted for "
              f"the process in the window"
              + (f" ({human_bytes(excluded)} on paths excluded by design, imports and libraries, counted "
                 f"apart; {human_bytes(cov.get('unseen_bytes') or 0)} unseen: pipes, sockets, direct "
                 f"system calls)" if excluded is not None else ""))

    # staging advice: /dev/shm as the fast tier, a budget of 10 % of the bytes read
    from tfdarshan.advice import render as advice_report, advisor, tiers
    from tfdarshan.advice.stager import _write_json
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else str(root)
    fast = tiers.probe(shm, size=8 << 20)
    budget = max(int(snap.posix["POSIX_BYTES_READ"].sum() // 10), 4096)
    advice = advisor.recommend(snap, fast, budget, steps=steps, step_files=step_files, source=str(session.directory))
    _write_json(session.directory / "advice.json", advice.to_dict())
    print(f"\nstaging advice ({shm} probed: {fast.bandwidth / 2**20:.0f} MiB/s, "
          f"{fast.read_latency * 1e6:.1f} µs per request):")
    print(advice_report.render_text(advice))
    print(f"\nopen the I/O tab:\n  {sys.executable} -m tensorboard.main --logdir {tb} --host 127.0.0.1 "
          f"--port 6006\n  then browse to http://127.0.0.1:6006/#tfdarshan")
    return 0
