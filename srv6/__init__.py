"""SRv6 addressing and headers: uSID (NEXT-C-SID) packing, the SRH (RFC 8754), checksums.

Imports no trio and nothing from mrc_transport or labs, so it can be used on its own.
"""
