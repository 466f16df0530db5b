"""The MRC protocol core: no sockets, no clock; ``now`` is an argument everywhere."""

from __future__ import annotations

from .config import Config
from .connection import Connection, ConnState
from .endpoint import Endpoint
from .transmit import Transmit

__all__ = ["Config", "ConnState", "Connection", "Endpoint", "Transmit"]
