"""MRC (Multipath Reliable Connection) over static SRv6 source routing."""

from __future__ import annotations

from mrc_transport import backend

__version__ = "0.1.0"

# the compiled core's shared library (mrc_transport._core__mypyc) is installed apart
__path__ = backend.extend_path(__path__, __name__)
