"""The endpoint's two sockets and the control messages that carry the path information.

Transmit: one ``SOCK_RAW, IPPROTO_RAW`` AF_INET6 socket takes the complete packets the
codec builds (IPv6 [+ SRH] + UDP + MRC); ``sendto(pkt, (first_hop_da, 0))`` and the
host's routes (one locator block per plane, via that plane's port) pick the port
(kernel-facts.md, "Sending SRv6 from userspace").

Receive: a plain UDP socket on ``[::]:port`` (a raw IPPROTO_IPV6 one for the encap
encoding, ``open_rx_encap``). The kernel verifies the UDP checksum (over
the final destination, RFC 8200 8.1) and strips the SRH (hosts need seg6_enabled); what
the protocol needs from the IPv6 header comes in control messages: IPV6_PKTINFO (the
destination as it arrived), IPV6_TCLASS (ECN) and IPV6_FLOWINFO (the flow label, which
carries the EV's low 16 bits; the source port carries the high 16). The endpoint reads
them a burst at a time with ``batchio.BurstReceiver`` (one recvmmsg, cmsgs parsed in C).
"""

from __future__ import annotations

import ctypes
import fcntl
import socket
import struct
from typing import NamedTuple

IPV6_FLOWINFO = 11  # <linux/in6.h>: as a socket option it asks for the cmsg as well
IPV6_RECVERR = 25
IPV6_RECVPKTINFO = 49
IPV6_PKTINFO = 50
IPV6_RECVTCLASS = 66
IPV6_TCLASS = 67
SIOCGIFMTU = 0x8921
FLOW_LABEL_MASK = 0xFFFFF

SOCKET_BUFFER = 16 << 20
ANC_SIZE = socket.CMSG_SPACE(20) + 2 * socket.CMSG_SPACE(4)

_INT = struct.Struct("=i")
_SOCK_FILTER = struct.Struct("HBBI")  # struct sock_filter: code, jt, jf, k (<linux/filter.h>)
_SO_ATTACH_FILTER = 26
_BPF_LD_LEN = 0x80  # BPF_LD | BPF_W | BPF_LEN
_BPF_LDH_ABS = 0x28  # BPF_LD | BPF_H | BPF_ABS
_BPF_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_BPF_RET_K = 0x06  # BPF_RET | BPF_K
_INNER_UDP_PORT = 40 + 2  # the inner IPv6 header, then the UDP source port


class Datagram(NamedTuple):
    """One UDP payload with what the kernel told about its IPv6 header."""

    payload: bytes
    """The UDP payload: the MRC header and data."""
    src: bytes
    """16-byte source address."""
    sport: int
    """UDP source port (the EV's high 16 bits)."""
    dst: bytes
    """16-byte destination as it arrived (the final one), from IPV6_PKTINFO."""
    tclass: int
    """Traffic class (DSCP << 2 | ECN), from IPV6_TCLASS."""
    flow_label: int
    """20-bit flow label, from IPV6_FLOWINFO."""


def _set_buffer(sock: socket.socket, opt: int, force_opt: int) -> None:
    try:  # root may exceed net.core.[rw]mem_max (SO_*BUFFORCE)
        sock.setsockopt(socket.SOL_SOCKET, force_opt, SOCKET_BUFFER)
    except PermissionError:
        sock.setsockopt(socket.SOL_SOCKET, opt, SOCKET_BUFFER)


def open_tx() -> socket.socket:
    """The raw socket complete IPv6 packets are sent through (header-include implicit)."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sock.setblocking(False)
    # without it a send into a full port queue (tbf) is dropped and reported as sent
    # (raw.c: ENOBUFS is only returned with recverr); with it the endpoint can wait
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVERR, 1)
    _set_buffer(sock, socket.SO_SNDBUF, 32)  # SO_SNDBUFFORCE
    return sock


def _path_info(sock: socket.socket) -> None:
    """Ask for the control messages that carry the path information, a large buffer,
    non-blocking receives."""
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVPKTINFO, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_RECVTCLASS, 1)
    sock.setsockopt(socket.IPPROTO_IPV6, IPV6_FLOWINFO, 1)
    _set_buffer(sock, socket.SO_RCVBUF, 33)  # SO_RCVBUFFORCE
    sock.setblocking(False)


def open_rx(port: int, host: str = "::") -> socket.socket:
    """The UDP socket MRC packets arrive on, with path information in control messages."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        _path_info(sock)
    except BaseException:
        sock.close()
        raise
    return sock


def port_filter(port: int) -> bytes:
    """A classic BPF socket filter (SO_ATTACH_FILTER) for a raw IPPROTO_IPV6 socket, whose
    packets start at the inner IPv6 header: it takes those for UDP destination ``port``
    (bytes 42-43) and, so that the endpoint counts them, those too short to say; the
    kernel drops the rest, as it would demultiplex UDP by port."""
    return b"".join(
        _SOCK_FILTER.pack(*insn)
        for insn in (
            (_BPF_LD_LEN, 0, 0, 0),  # A = the packet's length
            (_BPF_JGE_K, 0, 2, _INNER_UDP_PORT + 2),  # too short for the port: take it
            (_BPF_LDH_ABS, 0, 0, _INNER_UDP_PORT),  # A = the inner UDP destination port
            (_BPF_JEQ_K, 0, 1, port),
            (_BPF_RET_K, 0, 0, 0xFFFFFFFF),  # take it whole
            (_BPF_RET_K, 0, 0, 0),  # not ours
        )
    )


def open_rx_encap(port: int) -> socket.socket:
    """The raw IPPROTO_IPV6 (41) socket encapsulated MRC packets for UDP ``port`` arrive
    on (the encap encoding): the kernel strips the outer header and delivers the inner
    packet, with the OUTER header's destination, traffic class and flow label in the
    control messages. The endpoint decapsulates and checks the rest
    (``batchio.decap_slot``): this kernel has no ip6tnl and no seg6local End.DT6 to do
    it. While such a socket is open the kernel also stops answering these packets with
    ICMPv6 Parameter Problem (unknown next header), which it sends when no protocol and
    no raw socket takes them. A raw socket sees every such packet of its namespace:
    ``port_filter`` keeps those of the other ports out."""
    sock = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_IPV6)
    try:
        program = ctypes.create_string_buffer(port_filter(port))
        fprog = struct.pack("HL", len(program.raw) // _SOCK_FILTER.size, ctypes.addressof(program))
        sock.setsockopt(socket.SOL_SOCKET, _SO_ATTACH_FILTER, fprog)  # the kernel copies it
        _path_info(sock)
    except BaseException:
        sock.close()
        raise
    return sock


def parse_cmsgs(ancdata: list[tuple[int, int, bytes]]) -> tuple[bytes, int, int]:
    """(destination, traffic class, flow label) from recvmsg's control messages.

    The IPV6_FLOWINFO cmsg is the 32-bit flowinfo word in network order: tclass << 20 |
    flow label (RFC 8200 section 3, without the version nibble).
    """
    dst, tclass, flow = b"", 0, 0
    for level, kind, data in ancdata:
        if level != socket.IPPROTO_IPV6:
            continue
        if kind == IPV6_PKTINFO and len(data) >= 16:
            dst = data[:16]
        elif kind == IPV6_TCLASS and len(data) >= 4:
            tclass = _INT.unpack_from(data)[0] & 0xFF
        elif kind == IPV6_FLOWINFO and len(data) >= 4:
            flow = int.from_bytes(data[:4], "big") & FLOW_LABEL_MASK
    return dst, tclass, flow


def interface_mtus() -> dict[str, int]:
    """MTU of every interface of this network namespace except loopback (SIOCGIFMTU:
    unlike /sys it always answers for the caller's namespace)."""
    out: dict[str, int] = {}
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        for _index, name in socket.if_nameindex():
            if name == "lo":
                continue
            req = struct.pack("16si12x", name.encode()[:15], 0)
            try:
                res = fcntl.ioctl(s.fileno(), SIOCGIFMTU, req)
            except OSError:
                continue
            out[name] = struct.unpack_from("16si", res)[1]
    return out
