"""MRC (Multipath Reliable Connection) over static SRv6 source routing."""

__version__ = "0.1.0"
