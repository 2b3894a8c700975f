"""One rank of a synchronous Keras job under mpirun in which one rank dies:
each batch ends with an allreduce (as gradients are averaged), so when the
victim SIGKILLs itself after batch KILL_AT the others block in that
collective until mpirun aborts the job (SIGTERM, then SIGKILL 1 s later).

Rank r reads OUT/../data/r<r>_<i>.bin, one file a batch, in order. After
each batch it records the batch done in OUT/rank<r>.progress (before the
allreduce), which tells the test which files were read before the rank's
last collect: tfdarshan's Keras callback runs after this one, so when the
progress says batch k, the batches before k were collected."""
import os
import signal
import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
data, out, victim, kill_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

files = sorted(os.path.join(data, f) for f in os.listdir(data) if f.startswith(f"r{rank}_"))
ds = tf.data.Dataset.from_tensor_slices(files).map(tf.io.read_file).map(
    lambda s: (tf.reshape(tf.cast(tf.strings.length(s), tf.float32), [1]), tf.constant([1.0]))).batch(1)
model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
model.compile("sgd", "mse")


class Synchronous(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        tmp = os.path.join(out, f".rank{rank}.progress")
        with open(tmp, "w") as f:
            f.write(str(batch))
        os.replace(tmp, os.path.join(out, f"rank{rank}.progress"))
        if rank == victim and batch == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        comm.allreduce(batch)


comm.Barrier()
model.fit(ds, epochs=1, verbose=0, callbacks=[Synchronous()])
