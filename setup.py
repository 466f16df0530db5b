# Only here because cffi_modules needs setuptools' setup(); everything else is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["csrc/build.py:ffibuilder"])
