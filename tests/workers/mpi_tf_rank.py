"""One rank of the shared four-rank TensorFlow job (tests/helpers/mpi_tf_job.py),
under mpirun with MPI_Init through mpi4py. Its set-up reads a "config"
file, reads its own two shards and the file every rank shares through a
tf.data map of tf.io.read_file (checking it got every byte), and sleeps;
then it fits a Keras model on a tf.data pipeline over its batch files, then
sleeps again after fit. It writes its own clock's figures (fit's wall
time, the set-up's) to OUT/rank<r>.json for the tests to compare."""
import json
import os
import sys
import time

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
shards, data, config, out, pause = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])
setup_started = time.perf_counter()
import numpy as np  # noqa: E402,F401
import tensorflow as tf  # noqa: E402

with open(config, "rb") as f:          # set-up I/O: not any step's
    f.read()
# the rank's shards and the shared file, each read whole by tf.io.read_file
mine = sorted(os.path.join(shards, f) for f in os.listdir(shards) if f.startswith(f"shard{rank}_"))
mine.append(os.path.join(shards, "shared.bin"))
total = sum(len(x.numpy()) for x in tf.data.Dataset.from_tensor_slices(mine).map(tf.io.read_file))
expected = sum(os.path.getsize(f) for f in mine)
if total != expected:
    sys.exit(f"rank {rank} read {total} bytes of {expected}")
assert comm.allreduce(1) == comm.Get_size()
time.sleep(pause)                      # set-up time: not any step's
files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(f"r{rank}_"))
ds = tf.data.Dataset.from_tensor_slices(files).map(tf.io.read_file).map(
    lambda s: (tf.reshape(tf.cast(tf.strings.length(s), tf.float32), [1]), tf.constant([1.0]))).batch(1)
model = tf.keras.Sequential([tf.keras.Input((1,)), tf.keras.layers.Dense(1)])
model.compile("sgd", "mse")
comm.Barrier()
before_fit = time.perf_counter()
model.fit(ds, epochs=2, verbose=0)
after_fit = time.perf_counter()
time.sleep(pause / 2)                  # after the steps: not any step's either
with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
    json.dump({"rank": rank, "fit": after_fit - before_fit, "setup": before_fit - setup_started,
               "batches": 2 * len(files)}, f)
comm.Barrier()
