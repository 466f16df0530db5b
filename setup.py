"""The package's native build (everything else is in pyproject.toml): the C fast path
through cffi (csrc/build.py) and the protocol core compiled by mypyc
(csrc/build_core.py ``BuildExt``), both made by ``pip install .``, ``pip wheel .`` and,
in place, ``make``."""

import importlib.util
import pathlib
import sys

from setuptools import setup

_spec = importlib.util.spec_from_file_location(
    "build_core", pathlib.Path(__file__).resolve().parent / "csrc" / "build_core.py"
)
assert _spec is not None
assert _spec.loader is not None
build_core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build_core)

setup(
    cffi_modules=["csrc/build.py:ffibuilder"],
    ext_modules=build_core.extensions(sys.argv),
    cmdclass={"build_ext": build_core.BuildExt},
)
