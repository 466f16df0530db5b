"""Errors raised by the srv6 package."""

from __future__ import annotations


class MalformedHeader(ValueError):
    """Bytes that claim to be an SRv6 header but are not a valid one.

    Raised by the ``*_untrusted`` parsers for every malformed input, so a receive loop can
    catch one type, count it and drop the packet.
    """
