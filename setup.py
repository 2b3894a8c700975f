"""Only here for what pyproject.toml cannot say: setuptools reads
cffi_modules from setup(), and the tab's folder `tb_plugin/` is imported as
`tfdarshan_tb`, a name `[tool.setuptools.packages.find]` cannot give a
folder. The packages are found, not listed, so a new sub-package (or a
folder of data without an `__init__.py`) is never left out of the wheel;
the rest of the metadata is in pyproject.toml."""
from setuptools import find_namespace_packages, setup

NOT_PACKAGES = ["*.__pycache__", "__pycache__"]
PLUGIN_DIR, PLUGIN = "tb_plugin", "tfdarshan_tb"

packages = find_namespace_packages(include=["tfdarshan", "tfdarshan.*"], exclude=NOT_PACKAGES)
packages += [PLUGIN] + [f"{PLUGIN}.{sub}" for sub in find_namespace_packages(PLUGIN_DIR, exclude=NOT_PACKAGES)]

setup(cffi_modules=["native/build_shim.py:ffibuilder"], packages=packages)
