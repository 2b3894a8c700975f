"""Put on PYTHONPATH by `tfdarshan run --children`: Python children attach
and write their own logs. Any other sitecustomize is still run."""
import importlib.machinery
import importlib.util
import os
import sys

if os.environ.get("TFDARSHAN_RUN_CONFIG"):
    try:
        from tfdarshan.tf.runner import start_child_from_environment
        start_child_from_environment()
    except Exception as e:  # never break the child
        print(f"tfdarshan: autostart failed: {e}", file=sys.stderr)

_here = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.machinery.PathFinder.find_spec(
    "sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _spec is not None and _spec.loader is not None:
    _next = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_next)
