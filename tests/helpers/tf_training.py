"""A small real training set-up the TensorFlow and tab tests share: TFRecord
files of random examples, a tf.data pipeline reading them in small requests,
a two-layer Keras model, and a custom loop under tf.profiler."""
import pathlib

import numpy as np


def write_tfrecords(tf, d: pathlib.Path, files=6, records=120, seed=0):
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(files):
        p = d / f"train-{i:03d}.tfrecord"
        with tf.io.TFRecordWriter(str(p)) as w:
            for _ in range(records):
                ex = tf.train.Example(features=tf.train.Features(feature={
                    "x": tf.train.Feature(float_list=tf.train.FloatList(value=rng.random(64).astype("float32"))),
                    "y": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(rng.integers(0, 2))]))}))
                w.write(ex.SerializeToString())
        out.append(str(p))
    return out


def dataset(tf, files, batch=16):
    def parse(r):
        f = tf.io.parse_single_example(r, {"x": tf.io.FixedLenFeature([64], tf.float32),
                                            "y": tf.io.FixedLenFeature([], tf.int64)})
        return f["x"], f["y"]
    # one file at a time, small reads: every step reads from disk
    return tf.data.TFRecordDataset(files, buffer_size=4096).map(parse).batch(batch)


def model(tf):
    m = tf.keras.Sequential([tf.keras.Input((64,)), tf.keras.layers.Dense(16, activation="relu"),
                             tf.keras.layers.Dense(2)])
    m.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def profiled_custom_loop(tf, files, logdir, steps=4):
    """A custom training loop under tf.profiler, its steps marked with
    Trace(step_num=...)."""
    m = model(tf)
    opt = tf.keras.optimizers.SGD()
    it = iter(dataset(tf, files).repeat())
    tf.profiler.experimental.start(str(logdir))
    for i in range(steps):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            x, y = next(it)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(y, m(x), from_logits=True))
            opt.apply_gradients(zip(tape.gradient(loss, m.trainable_variables), m.trainable_variables))
    tf.profiler.experimental.stop()
