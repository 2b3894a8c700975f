"""The case studies' slow FUSE tier, for tests: whether it can be mounted
here, and a skip that says why not."""
import functools
import os
import shutil

import pytest


@functools.lru_cache(maxsize=None)
def unavailable():
    """Why the slow tier cannot be mounted here, or None when it can (asked
    once a process: the answer does not change while the tests run)."""
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


def skip_unless_available(reason=unavailable):
    """Skip the calling test or fixture when the slow tier cannot be mounted
    here, saying why. `reason` is the check to ask: a scenario that needs
    more than the tier (mpirun, say) passes its own."""
    why = reason()
    if why:
        pytest.skip(why)
