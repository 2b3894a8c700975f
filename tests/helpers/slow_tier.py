"""The case studies' slow FUSE tier, for tests: whether it can be mounted here."""
import os
import shutil


def unavailable():
    """Why the slow tier cannot be mounted here, or None when it can."""
    if os.geteuid() != 0:
        return "mounting the slow FUSE tier needs root"
    if not os.path.exists("/dev/fuse"):
        return "no /dev/fuse on this machine"
    if not shutil.which("pkg-config") or not os.path.exists("/usr/include/fuse3/fuse.h"):
        return "libfuse3's development files are missing (make system-deps installs them)"
    try:
        from case_studies.slowfs import build
        build()
    except RuntimeError as e:
        return str(e)
    return None
