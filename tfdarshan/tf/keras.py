"""Keras: step boundaries at batch boundaries.

`IOProfileCallback()` marks each training batch as a step in every open
profiling window (the TensorBoard callback's `profile_batch` window gets
one automatically). Steps are numbered like TensorBoard numbers them: the
global training batch, from 1. Given `log_dir` and `profile_batch=(a, b)`,
it also opens its own window over those batches, without XProf, and writes
the same files the profiler hook writes."""
from __future__ import annotations

import pathlib
from typing import Optional, Tuple

import keras

from tfdarshan.logs.logdir import session_root
from tfdarshan.tf import session, steps


class IOProfileCallback(keras.callbacks.Callback):
    def __init__(self, log_dir: Optional[str] = None, profile_batch: Optional[Tuple[int, int]] = None):
        super().__init__()
        if profile_batch is not None:
            a, b = (profile_batch, profile_batch) if isinstance(profile_batch, int) else profile_batch
            if not (0 < a <= b) or log_dir is None:
                raise ValueError("profile_batch=(start, stop) needs 0 < start <= stop and a log_dir")
            self._window = (int(a), int(b))
        else:
            self._window = None
        self.log_dir = log_dir
        self._batch = 0
        self._session = None
        self._driving = False

    def on_train_begin(self, logs=None):
        self._batch = 0
        if not self._driving:
            steps.keras_driving["count"] += 1
            self._driving = True

    def on_train_end(self, logs=None):
        if self._session is not None:
            self._close()
        if self._driving:
            steps.keras_driving["count"] -= 1
            self._driving = False

    def on_train_batch_begin(self, batch, logs=None):
        self._batch += 1
        if self._window and self._batch == self._window[0] and self._session is None:
            self._session = session.open_session(self.log_dir, label="keras")
        if steps.active():
            steps.mark_begin(self._batch)

    def on_train_batch_end(self, batch, logs=None):
        if steps.active():
            steps.mark_end(self._batch)
        if self._session is not None and self._batch >= self._window[1]:
            self._close()

    def _close(self):
        closing, self._session = self._session, None
        session.close_session(closing, session_root(pathlib.Path(self.log_dir, "train"), beside_xprof=False)
                              / session.run_directory_name(closing.started_wall))
