"""One worker of a two-worker MultiWorkerMirroredStrategy job on loopback
(TF_CONFIG from the environment). Keras 3's fit() does not run under this
strategy, so it is a custom loop (strategy.run), profiled with tf.profiler
and Trace(step_num=...) markers. argv: logdir, then the TFRecord files."""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

import tfdarshan  # noqa: E402,F401  (the import enables the profiler hooks)

logdir, files = sys.argv[1], sys.argv[2:]
strategy = tf.distribute.MultiWorkerMirroredStrategy()


def parse(r):
    f = tf.io.parse_single_example(r, {"x": tf.io.FixedLenFeature([64], tf.float32),
                                        "y": tf.io.FixedLenFeature([], tf.int64)})
    return f["x"], f["y"]


with strategy.scope():
    w = tf.Variable(tf.zeros((64, 2)))
    opt = tf.keras.optimizers.SGD(0.1)

opts = tf.data.Options()
opts.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
ds = tf.data.Dataset.from_tensor_slices(files).interleave(
    lambda f: tf.data.TFRecordDataset(f, buffer_size=4096), cycle_length=1).map(parse).batch(16).repeat()
it = iter(strategy.experimental_distribute_dataset(ds.with_options(opts)))


@tf.function
def train_step(batch):
    def replica(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, x @ w, from_logits=True))
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss
    return strategy.run(replica, args=batch)


train_step(next(it))                          # compile before profiling
tf.profiler.experimental.start(logdir)
for step in range(2, 5):
    with tf.profiler.experimental.Trace("train", step_num=step, _r=1):
        train_step(next(it))
tf.profiler.experimental.stop()
print("worker done", os.getpid())
