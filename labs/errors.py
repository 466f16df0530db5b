"""The one error type family labs raise; the CLI prints it as one line and exits 2."""

from __future__ import annotations


class LabError(Exception):
    """Anything a user can fix: a bad topology, an unknown lab, node or link."""


class TopologyError(LabError):
    """A topology file or preset that does not describe a valid fabric."""


class ApplyError(LabError):
    """An operation failed while building or changing a lab; says which node and op."""
