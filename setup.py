# Only here because setuptools reads cffi_modules from setup(); the rest of
# the metadata is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["native/build_shim.py:ffibuilder"])
