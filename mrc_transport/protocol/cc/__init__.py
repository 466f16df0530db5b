"""Congestion control algorithms behind one small interface, chosen by name."""

from __future__ import annotations

from mrc_transport import backend

__path__ = backend.extend_path(__path__, __name__)  # as mrc_transport/protocol/__init__.py

from ..config import Config
from .base import CongestionControl
from .fixed import FixedWindow
from .nscc import Nscc
from .nscc_lab import LabNscc

CONGESTION_CONTROLS: dict[str, type[CongestionControl]] = {
    cls.name: cls for cls in (Nscc, LabNscc, FixedWindow)
}


def make_cc(cfg: Config) -> CongestionControl:
    """The algorithm named by ``cfg.cc``."""
    try:
        return CONGESTION_CONTROLS[cfg.cc](cfg)
    except KeyError:
        known = sorted(CONGESTION_CONTROLS)
        raise ValueError(f"unknown congestion control {cfg.cc!r}; known: {known}") from None


__all__ = ["CONGESTION_CONTROLS", "CongestionControl", "FixedWindow", "LabNscc", "Nscc", "make_cc"]
