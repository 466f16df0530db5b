"""The MRC protocol core: no sockets, no clock; ``now`` is an argument everywhere."""

from __future__ import annotations

from mrc_transport import backend

# before any module of the core is imported: its compiled build, when that runs, comes
# first (mrc_transport/backend.py)
__path__ = backend.extend_path(__path__, __name__)

from . import sender as _sender
from .config import Config
from .connection import Connection, ConnState
from .endpoint import Endpoint
from .transmit import Transmit

COMPILED = not str(_sender.__file__).endswith(".py")
"""Whether the core running is mypyc's build of these modules (csrc/build_core.py) rather
than their source: the package's build (setup.py) makes it, ``MRC_PUREPYTHON=1`` forces
the source."""

__all__ = ["COMPILED", "Config", "ConnState", "Connection", "Endpoint", "Transmit"]
