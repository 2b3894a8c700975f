"""ImageNet-like study: the paper's pipeline (list of files -> map(read_file +
decode + resize) -> batch) feeding a small AlexNet-style model on the CPU."""
from __future__ import annotations

IMAGE = 96


def pipeline(paths, labels, batch: int, parallel: int):
    import tensorflow as tf

    def load(path, label):
        img = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(img, (IMAGE, IMAGE)) / 255.0, label

    ds = tf.data.Dataset.from_tensor_slices((list(paths), list(labels)))
    return ds.map(load, num_parallel_calls=parallel).batch(batch).prefetch(2)


def model(classes: int):
    import tensorflow as tf
    L = tf.keras.layers
    m = tf.keras.Sequential([
        tf.keras.Input((IMAGE, IMAGE, 3)),
        L.Conv2D(24, 11, strides=4, activation="relu"), L.MaxPool2D(3, 2),
        L.Conv2D(48, 5, padding="same", activation="relu"), L.MaxPool2D(3, 2),
        L.Conv2D(64, 3, padding="same", activation="relu"),
        L.Conv2D(64, 3, padding="same", activation="relu"), L.GlobalAveragePooling2D(),
        L.Dense(128, activation="relu"), L.Dense(classes),
    ])
    m.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return m


def label_of(path: str) -> int:
    return int(path.split("/")[-2][1:])
