"""One rank of a Keras job with a set-up before model.fit(): it reads a
"config" file and sleeps, then fits on a tf.data pipeline over its files,
then sleeps again after fit. It writes its own clock's figures (fit's wall
time, the set-up's) to OUT/rank<r>.json for the test to compare."""
import json
import os
import sys
import time

from mpi4py import MPI

rank = MPI.COMM_WORLD.Get_rank()
data, config, out, pause = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
setup_started = time.perf_counter()
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

with open(config, "rb") as f:          # set-up I/O: not any step's
    f.read()
time.sleep(pause)                      # set-up time: not any step's
files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(f"r{rank}_"))
ds = tf.data.Dataset.from_tensor_slices(files).map(tf.io.read_file).map(
    lambda s: (tf.reshape(tf.cast(tf.strings.length(s), tf.float32), [1]), tf.constant([1.0]))).batch(1)
model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
model.compile("sgd", "mse")
MPI.COMM_WORLD.Barrier()
before_fit = time.perf_counter()
model.fit(ds, epochs=2, verbose=0)
after_fit = time.perf_counter()
time.sleep(pause / 2)                  # after the steps: not any step's either
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "fit": after_fit - before_fit, "setup": before_fit - setup_started,
               "batches": 2 * len(files)}, f)
MPI.COMM_WORLD.Barrier()
