"""The case studies' slow FUSE tier, for tests: whether it can be mounted here."""
import os


def unavailable():
    """Why the slow tier cannot be mounted here, or None when it can."""
    if os.geteuid() != 0:
        return "mounting the slow FUSE tier needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    try:
        import fuse  # noqa: F401  (fusepy loads libfuse2 here)
    except (ImportError, OSError, EnvironmentError) as e:
        return f"fusepy or libfuse2 missing (make test installs them): {e}"
    return None
