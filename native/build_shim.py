"""cffi build script for the shim (out-of-line API mode, run by setuptools)."""
import pathlib
import platform

from cffi import FFI

HERE = pathlib.Path(__file__).parent
SOURCES = ["shim.c", "records_shards.c", "records_table.c", "records_posix.c", "records_stdio.c", "records_collect.c", "records_busy.c",
           "records_fold.c", "records_kernel.c", "elfpatch.c", "maps.c", "wrappers.c", "wrappers_kernel.c", "darshan_hash.c", "bench.c"]

ffibuilder = FFI()
ffibuilder.cdef((HERE / "api.h").read_text())

extra_compile_args = ["-O2", "-flto", "-std=gnu11", "-fvisibility=hidden", "-Wall", "-Wno-unused-function"]
if platform.machine() == "x86_64":
    # thread-locals through TLS descriptors: fast without needing static TLS
    extra_compile_args.append("-mtls-dialect=gnu2")

ffibuilder.set_source(
    "tfdarshan._native_shim",
    '#include "shim.h"\n',
    sources=[f"native/{s}" for s in SOURCES],
    include_dirs=["native"],
    extra_compile_args=extra_compile_args,
    extra_link_args=["-O2", "-flto"],
    libraries=["dl", "pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
