"""Install the session drivers: `enable()` wraps the TensorFlow profiler's
functions and Trace (profiler_hooks) and Keras' CallbackList (keras_hook, which
then adds an IOProfileCallback next to a profiling TensorBoard callback);
`disable()` puts every original back. Modules not imported yet are wrapped
when they are."""
from __future__ import annotations

import importlib.abc
import sys

from tfdarshan.tf import keras_hook, patching, profiler_hooks

_enabled = False


_HOOKS = {profiler_hooks.PROFILER: profiler_hooks.patch_profiler, profiler_hooks.TRACE: profiler_hooks.patch_trace,
          keras_hook.CALLBACKS: keras_hook.patch_callback_list}


class _PostImport(importlib.abc.MetaPathFinder):
    """Patches a module right after it is executed, wherever it is imported."""

    def find_spec(self, name, path=None, target=None):
        if name not in _HOOKS or not _enabled:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                loader = spec.loader
                original = loader.exec_module

                class Loader(importlib.abc.Loader):
                    def create_module(self, spec):
                        return loader.create_module(spec)

                    def exec_module(self, module):
                        original(module)
                        with patching.lock:
                            if _enabled:
                                patching.safely(_HOOKS[name], module)

                spec.loader = Loader()
                return spec
        return None


_finder = _PostImport()


def enable() -> None:
    """Record I/O in every TensorFlow profiler session from now on."""
    global _enabled
    with patching.lock:
        if _enabled:
            return
        _enabled = True
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        for name, hook in _HOOKS.items():
            mod = sys.modules.get(name)
            if mod is not None:
                patching.safely(hook, mod)


def disable() -> None:
    """Put TensorFlow's and Keras' functions back exactly as they were."""
    global _enabled
    with patching.lock:
        _enabled = False
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        patching.restore_all()
        profiler_hooks.unpatch_api_modules()
        profiler_hooks.cancel_current()


def enabled() -> bool:
    return _enabled
