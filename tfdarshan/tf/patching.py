"""Wrapping TensorFlow's and Keras' Python functions, and putting every
original back: the bookkeeping the drivers share."""
from __future__ import annotations

import logging
import threading
from typing import Callable, List, Tuple

logger = logging.getLogger("tfdarshan")

lock = threading.RLock()
patched: List[Tuple[object, str, object]] = []      # (owner, attribute, original)


def patch(owner, attr: str, make: Callable) -> None:
    """Replace owner.attr with make(original), remembering the original."""
    original = getattr(owner, attr)
    if getattr(original, "__tfdarshan_original__", None) is not None:
        return                      # already ours
    wrapper = make(original)
    wrapper.__tfdarshan_original__ = original
    setattr(owner, attr, wrapper)
    patched.append((owner, attr, original))


def restore_all() -> None:
    for owner, attr, original in reversed(patched):
        setattr(owner, attr, original)
    patched.clear()


def safely(fn, *args):
    """Our bookkeeping must never break the training job."""
    try:
        return fn(*args)
    except Exception as e:  # noqa: BLE001
        logger.warning("tfdarshan: %s failed: %s", getattr(fn, "__name__", fn), e)
        return None
