"""Checkpointing study: a wide multilayer perceptron (about 21 M weights,
an 84 MB checkpoint with SGD) trained on in-memory data, so the only file
I/O is its checkpoints, saved with tf.train.CheckpointManager every N steps
either straight to the slow tier or to /dev/shm and copied to the slow tier
by a background thread."""
from __future__ import annotations

import os
import queue
import shutil
import threading
from typing import List, Optional

FEATURES = 1024
WIDTH = 4096
CLASSES = 10


def data(steps: int, batch: int, seed: int = 0):
    import numpy as np
    import tensorflow as tf
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((steps * batch, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, steps * batch)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)


def model(width: int = WIDTH):
    import tensorflow as tf
    L = tf.keras.layers
    return tf.keras.Sequential([tf.keras.Input((FEATURES,)), L.Dense(width, activation="relu"),
                                L.Dense(width, activation="relu"), L.Dense(CLASSES)])


class Drain:
    """Copies each new checkpoint from the fast tier to the slow one in a
    background thread, so training waits only for the fast tier. The copy
    is read/write in 8 MiB pieces with an fsync at the end: a checkpoint
    counts as saved once it is durable on the slow tier."""

    def __init__(self, destination: str):
        self.destination = destination
        self._todo: "queue.Queue[Optional[List[str]]]" = queue.Queue()
        self.errors: List[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="checkpoint-drain", daemon=True)
        self._thread.start()

    def submit(self, files: List[str]) -> None:
        self._todo.put(list(files))

    def close(self) -> None:
        """Wait until every submitted checkpoint is on the slow tier."""
        self._todo.put(None)
        self._thread.join()
        if self.errors:
            raise self.errors[0]

    def _run(self) -> None:
        while True:
            files = self._todo.get()
            if files is None:
                return
            try:
                for f in files:
                    self._copy(f, os.path.join(self.destination, os.path.basename(f)))
            except BaseException as e:           # reported by close()
                self.errors.append(e)

    @staticmethod
    def _copy(src: str, dst: str) -> None:
        tmp = dst + ".tmpdrain"
        with open(src, "rb") as i, open(tmp, "wb") as o:
            shutil.copyfileobj(i, o, 8 << 20)
            o.flush()
            os.fsync(o.fileno())
        os.replace(tmp, dst)     # readers never see half a checkpoint


def checkpoint_files(prefix: str) -> List[str]:
    """The files of the checkpoint saved at `prefix`, and the state file."""
    d, base = os.path.split(prefix)
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.startswith(base + ".")) + \
        [os.path.join(d, "checkpoint")]
