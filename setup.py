"""Only here for what pyproject.toml cannot say: setuptools reads
cffi_modules from setup(). The packages (tfdarshan and the tab, tfdarshan_tb,
each folder named as it is imported) are found in pyproject.toml, not
listed, so a new sub-package (or a folder of data without an `__init__.py`)
is never left out of the wheel."""
from setuptools import setup

setup(cffi_modules=["native/build_shim.py:ffibuilder"])
