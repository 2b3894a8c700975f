"""cffi build script for the shim (out-of-line API mode, run by setuptools).

The sources are listed from the bottom of the shim up (base and state
owners, Darshan's rules, wrappers, the conductor, attach); tests/test_layout.py
checks that each object file takes symbols only from those below it.
`builder()` also makes the benchmarks' copy of the shim, with extra sources
(benchmarks/stub_shim.py), which is never shipped."""
import pathlib
import platform

from cffi import FFI

HERE = pathlib.Path(__file__).parent
# bottom to top: an object's undefined symbols come from objects before it
# in this list, never after (tests/test_layout.py)
LAYERS = [
    ["clock.c", "jump_return.c", "darshan_hash.c", "hooks.c", "maps.c", "pages.c"],  # the base: no state of the recording
    ["fsblock.c"],                                                  # a file's block size, remembered per directory
    ["elfpatch.c", "paths.c", "table.c", "fdmap.c", "trace.c", "heat.c", "busy.c"],   # state owners
    ["threads.c", "staged.c"],                                      # threads and shards (sized by the table); staged copies
    ["totals.c"],                                                   # the collector's totals of the shards
    ["names.c"],                                                    # a path to its record
    ["rules_posix.c", "rules_stdio.c", "rules_kernel.c"],           # Darshan's rules
    ["redirect.c"],                                                 # serving staged copies
    ["wrappers.c", "wrappers_kernel.c", "wrappers_dlopen.c", "wrappers_staged.c"],  # the wrappers
    ["collect.c"],                                                  # the conductor
    ["attach.c"],                                                   # attach / detach
]
SOURCES = [s for layer in LAYERS for s in layer]

COMPILE_ARGS = ["-O2", "-std=gnu11", "-D_GNU_SOURCE", "-fvisibility=hidden", "-Wall", "-Wno-unused-function"]
if platform.machine() == "x86_64":
    # thread-locals through TLS descriptors: fast without needing static TLS
    COMPILE_ARGS.append("-mtls-dialect=gnu2")


def builder(extra_sources=(), extra_cdef: str = "", root: str = "native") -> FFI:
    """An FFI that builds the shim from `root` (a path relative to the
    directory setuptools runs in, or absolute), with extra sources and
    declarations for a benchmark's copy."""
    ffi = FFI()
    ffi.cdef((HERE / "api.h").read_text() + extra_cdef)
    ffi.set_source(
        "tfdarshan._native_shim",
        "#include <stdint.h>\n#include <stddef.h>\n#include \"api.h\"\n" + extra_cdef,
        sources=[f"{root}/{s}" for s in SOURCES] + [str(s) for s in extra_sources],
        include_dirs=[root],
        extra_compile_args=COMPILE_ARGS + ["-flto"],
        extra_link_args=["-O2", "-flto"],
        libraries=["dl", "pthread"],
    )
    return ffi


ffibuilder = builder()

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
